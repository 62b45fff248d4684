//! Draws `target/contention-bench.csv` (written by `cargo bench -p
//! tern-contention --bench scaling`) as a PNG: the run time of every check
//! of the `tasks` family (1-50 kinds) against the 1 s target, and the CPU
//! time and peak memory of the big `forest` and `chain` families against
//! their number of kinds.
//!
//! `cargo run --release -p tern-contention --features plot --bin contention-plot -- [CSV] [PNG]`
//! (defaults: `target/contention-bench.csv`, `docs/contention-scaling.png`).
//! The font is read from `TERN_PLOT_FONT` (default DejaVu Sans).
#![allow(clippy::expect_used, clippy::print_stdout)]

use plotters::prelude::*;

/// One measured point: shape, kinds, variant, wall seconds, CPU seconds, MiB.
struct Point {
    shape: String,
    kinds: f64,
    variant: String,
    wall: f64,
    cpu: f64,
    mib: f64,
}

/// Which value of a point a panel shows.
type Pick = fn(&Point) -> f64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let csv_path = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/contention-bench.csv".into());
    let png_path = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "docs/contention-scaling.png".into());
    let csv = std::fs::read_to_string(&csv_path)
        .unwrap_or_else(|e| panic!("{csv_path}: {e} (run the bench first)"));
    // shape,kinds,variant,verdict,finite,suggested,bytes,seconds,cpu_seconds,peak_rss_mib
    let points: Vec<Point> = csv
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            (f.len() >= 10).then(|| Point {
                shape: f[0].to_owned(),
                kinds: f[1].parse().unwrap_or(0.0),
                variant: f[2].to_owned(),
                wall: f[7].parse().unwrap_or(0.0),
                cpu: f[8].parse().unwrap_or(0.0),
                mib: f[9].parse().unwrap_or(0.0),
            })
        })
        .collect();
    tern_core::plot::register_font().unwrap_or_else(|e| panic!("{e}"));
    let root = BitMapBackend::new(&png_path, (1500, 480)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let panels = root.split_evenly((1, 3));
    let series = [("safe", BLUE), ("unsafe", RED)];
    // Panel 1: the tasks family, wall time, with the 1 s target.
    {
        let mut chart = ChartBuilder::on(&panels[0])
            .caption("tasks family: each check (wall)", ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..52f64, 0f64..1.2f64)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("kinds")
            .y_desc("seconds")
            .draw()
            .expect("mesh");
        for (variant, colour) in series {
            let data: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.shape == "tasks" && p.variant == variant)
                .map(|p| (p.kinds, p.wall))
                .collect();
            tern_core::plot::draw_line(&mut chart, &data, colour, 3, Some(variant))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        chart
            .draw_series(LineSeries::new(vec![(0.0, 1.0), (52.0, 1.0)], BLACK))
            .expect("target")
            .label("1 s target")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // Panels 2 and 3: the big families, CPU time and peak memory.
    let big: Vec<&Point> = points.iter().filter(|p| p.shape != "tasks").collect();
    let max_k = big.iter().map(|p| p.kinds / 1000.0).fold(1.0, f64::max) * 1.05;
    let max_cpu = big.iter().map(|p| p.cpu).fold(1.0, f64::max) * 1.15;
    let max_mib = big.iter().map(|p| p.mib).fold(1.0, f64::max) * 1.15;
    let big_panels: [(&DrawingArea<_, _>, &str, &str, f64, Pick); 2] = [
        (
            &panels[1],
            "big schemas: CPU time",
            "CPU seconds",
            max_cpu,
            |p| p.cpu,
        ),
        (
            &panels[2],
            "big schemas: peak memory",
            "MiB (peak RSS)",
            max_mib,
            |p| p.mib,
        ),
    ];
    for (area, title, unit, max, pick) in big_panels {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..max_k, 0f64..max)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("thousand kinds")
            .y_desc(unit)
            .draw()
            .expect("mesh");
        let lines = [
            ("forest", "safe", BLUE),
            ("forest", "unsafe", RED),
            ("chain", "safe", CYAN),
            ("chain", "unsafe", MAGENTA),
        ];
        for (shape, variant, colour) in lines {
            let data: Vec<(f64, f64)> = big
                .iter()
                .filter(|p| p.shape == shape && p.variant == variant)
                .map(|p| (p.kinds / 1000.0, pick(p)))
                .collect();
            let label = format!("{shape} {variant}");
            tern_core::plot::draw_line(&mut chart, &data, colour, 3, Some(&label))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    root.present().expect("write the png");
    println!("plot written to {png_path}");
}
