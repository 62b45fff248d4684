//! Draws the lazy-vs-eager timeline of `adapters/redis/benches/timeline.rs`
//! (its CSV) as a PNG: operations per second and p99 latency against the time
//! since the application's code changed, one line per scenario.
//!
//! ```sh
//! cargo run --release -p tern-testkit --features plot --bin timeline-plot -- \
//!     target/lazy-timeline.csv docs/lazy-timeline.png
//! ```

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a plotting tool: fail loudly

use std::collections::BTreeMap;

use plotters::prelude::*;

/// One scenario's buckets: (seconds since the change, ops/s, p99 ms), and when
/// its migration ended (seconds since the change).
struct Series {
    points: Vec<(f64, f64, f64)>,
    migrated_s: f64,
}

fn read(path: &str) -> BTreeMap<String, Series> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out: BTreeMap<String, Series> = BTreeMap::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let num = |i: usize| -> f64 {
            f.get(i)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{path}:{}: field {} is not a number", n + 1, i + 1))
        };
        let change = num(4);
        let s = out.entry(f[0].to_owned()).or_insert(Series {
            points: Vec::new(),
            migrated_s: (num(5) - change) / 1000.0,
        });
        s.points.push(((num(1) - change) / 1000.0, num(2), num(3)));
    }
    out
}

fn color(name: &str) -> RGBColor {
    if name == "eager" { RED } else { BLUE }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [csv, png] = args.as_slice() else {
        panic!("usage: timeline-plot TIMELINE.csv OUT.png");
    };
    let data = read(csv);
    tern_core::plot::register_font().unwrap_or_else(|e| panic!("{e}"));
    let root = BitMapBackend::new(png, (1000, 720)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let (top, bottom) = root.split_vertically(380);
    let all = || data.values().flat_map(|s| s.points.iter());
    let (x0, x1) = all().fold((0f64, 0f64), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let max_rate = all().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let max_p99 = all().map(|p| p.2).fold(1.0, f64::max) * 1.1;
    for (area, title, y_desc, max, pick) in [
        (
            &top,
            "application throughput across the schema change (Redis)",
            "operations / s",
            max_rate,
            1usize,
        ),
        (
            &bottom,
            "p99 latency of the application's operations",
            "p99 (ms)",
            max_p99,
            2usize,
        ),
    ] {
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, 0f64..max)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc("seconds since the code changed (eager: app paused until its run ends)")
            .y_desc(y_desc)
            .draw()
            .expect("mesh");
        for (name, s) in &data {
            let c = color(name);
            let line: Vec<(f64, f64)> = s
                .points
                .iter()
                .map(|p| (p.0, if pick == 1 { p.1 } else { p.2 }))
                .collect();
            let label = format!("{name} (migration done at +{:.1} s)", s.migrated_s);
            chart
                .draw_series(LineSeries::new(line, c.stroke_width(2)))
                .expect("line")
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(s.migrated_s, 0.0), (s.migrated_s, max)],
                    c.mix(0.4),
                )))
                .expect("marker");
        }
        tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    root.present().expect("write the png");
    println!("plot written to {png}");
}
