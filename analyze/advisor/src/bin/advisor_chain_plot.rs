//! Draws `target/advisor-chain.csv` (written by `cargo bench -p tern-advisor --bench advisor --
//! --scaling`) as a PNG: run time and peak memory of `tern advise --time-limit 5` against the size
//! of the model (a chain of N entities with one query along it).
//!
//! `cargo run --release -p tern-advisor --features plot --bin advisor-chain-plot -- [CSV] [PNG]`
//! (defaults: `target/advisor-chain.csv`, `docs/advisor-chain.png`).
#![allow(clippy::expect_used, clippy::print_stdout)]

use plotters::prelude::*;

/// A panel's value of a measured point (entities, seconds, MiB).
type Pick = fn(&(f64, f64, f64)) -> f64;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let csv_path = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "target/advisor-chain.csv".into());
    let png_path = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "docs/advisor-chain.png".into());
    let csv = std::fs::read_to_string(&csv_path)
        .unwrap_or_else(|e| panic!("{csv_path}: {e} (run the bench with --scaling first)"));
    // entities,candidates,prepare_s,solve_s,total_s,peak_rss_mib,optimal
    let points: Vec<(f64, f64, f64)> = csv
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            Some((
                f.first()?.parse().ok()?,
                f.get(4)?.parse().ok()?,
                f.get(5)?.parse().ok()?,
            ))
        })
        .collect();
    tern_core::plot::register_font().unwrap_or_else(|e| panic!("{e}"));
    let root = BitMapBackend::new(&png_path, (1000, 480)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let (left, right) = root.split_horizontally(500);
    let max_x = points.iter().map(|p| p.0).fold(100.0, f64::max) * 1.3;
    let max_t = points.iter().map(|p| p.1).fold(6.0, f64::max) * 1.15;
    let max_m = points.iter().map(|p| p.2).fold(1.0, f64::max) * 1.15;
    let panels: [(&DrawingArea<_, _>, &str, &str, f64, Pick); 2] = [
        (&left, "run time", "seconds", max_t, |p| p.1),
        (&right, "peak memory", "MiB (peak RSS)", max_m, |p| p.2),
    ];
    for (area, title, unit, max, f) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("tern advise --time-limit 5, chain: {title}"),
                ("sans-serif", 20),
            )
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d((20f64..max_x).log_scale(), 0f64..max)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("entities in the model (log scale)")
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
                .draw_series(LineSeries::new(vec![(20.0, 5.0), (max_x, 5.0)], RED))
                .expect("limit")
                .label("--time-limit 5")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
            tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    root.present().expect("write the png");
    println!("plot written to {png_path}");
}
