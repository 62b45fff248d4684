//! Draws `target/advisor-bench.csv` (written by `cargo bench -p tern-advisor --bench advisor`) as a
//! PNG: run time and peak memory against the Watts–Strogatz scale, unlimited solves.
//!
//! `cargo run -p tern-advisor --features plot --bin advisor-plot -- [CSV] [PNG]`
//! (defaults: `target/advisor-bench.csv`, `docs/advisor-scaling.png`). The font is read from
//! `TERN_PLOT_FONT` (default DejaVu Sans).
#![allow(clippy::expect_used, clippy::print_stdout)]

use plotters::prelude::*;

/// A panel's value of a measured point (scale, seconds, MiB).
type Pick = fn(&(f64, f64, f64)) -> f64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let csv_path = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/advisor-bench.csv".into());
    let png_path = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "docs/advisor-scaling.png".into());
    let csv = std::fs::read_to_string(&csv_path)
        .unwrap_or_else(|e| panic!("{csv_path}: {e} (run the bench first)"));
    // limit_s,case,entities,queries,updates,candidates,variables,prepare_s,solve_s,total_s,peak_rss_mib,...
    let mut points: Vec<(f64, f64, f64)> = Vec::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 11 || f[0] != "none" || !f[1].starts_with("ws") {
            continue;
        }
        let scale: f64 = f[1]
            .trim_start_matches("ws")
            .trim_end_matches('x')
            .parse()
            .unwrap_or(0.0);
        let (Ok(total), Ok(rss)) = (f[9].parse::<f64>(), f[10].parse::<f64>()) else {
            continue;
        };
        points.push((scale, total, rss));
    }
    tern_core::plot::register_font().unwrap_or_else(|e| panic!("{e}"));
    let root = BitMapBackend::new(&png_path, (1000, 480)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let (left, right) = root.split_horizontally(500);
    let max_t = points.iter().map(|p| p.1).fold(10.0, f64::max) * 1.15;
    let max_m = points.iter().map(|p| p.2).fold(1.0, f64::max) * 1.15;
    let panels: [(&DrawingArea<_, _>, &str, &str, f64, Pick); 2] = [
        (&left, "run time", "seconds", max_t, |p| p.1),
        (&right, "peak memory", "MiB (peak RSS)", max_m, |p| p.2),
    ];
    for (area, title, unit, max, f) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("tern advise, Watts-Strogatz: {title}"),
                ("sans-serif", 20),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.5f64..4.5f64, 0f64..max)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("scale (7s entities, 30s queries)")
            .y_desc(unit)
            .draw()
            .expect("mesh");
        let data: Vec<(f64, f64)> = points.iter().map(|p| (p.0, f(p))).collect();
        chart
            .draw_series(LineSeries::new(data.clone(), BLUE.stroke_width(2)))
            .expect("line");
        chart
            .draw_series(
                data.into_iter()
                    .map(|(x, y)| Circle::new((x, y), 4, BLUE.filled())),
            )
            .expect("points");
        if title == "run time" {
            chart
                .draw_series(LineSeries::new(vec![(0.5, 10.0), (4.5, 10.0)], RED))
                .expect("target")
                .label("10 s target")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
            tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    root.present().expect("write the png");
    println!("plot written to {png_path}");
}
