//! Draws a CSV of the advisor's bench as a PNG: run time and peak memory against the size of the
//! input, one panel each, with the time target as a red line.
//!
//! - `ws` (the default): `target/advisor-bench.csv` (written by `cargo bench -p tern-advisor
//!   --bench advisor`), unlimited solves (CPU seconds) against the Watts–Strogatz scale, drawn to
//!   `docs/advisor-scaling.png`;
//! - `chain`: `target/advisor-chain.csv` (written by `cargo bench -p tern-advisor --bench advisor
//!   -- --scaling`), `tern advise --time-limit 5` against the size of the model (a chain of N
//!   entities with one query along it), drawn to `docs/advisor-chain.png`.
//!
//! - `bound`: `target/advisor-chain-bound.csv` (also written by `-- --scaling`), the same chain
//!   without a time limit under the enumeration's default work bound, CPU seconds (and the
//!   unbounded enumeration, magenta, up to 200 entities), drawn to `docs/advisor-chain-bound.png`.
//!
//! `cargo run --release -p tern-advisor --features plot --bin advisor-plot -- [ws|chain|bound] [CSV] [PNG]`.
//! The font is read from `TERN_PLOT_FONT` (default DejaVu Sans).
#![allow(clippy::expect_used, clippy::print_stdout)]

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

/// A measured point: (size, seconds, MiB).
type Point = (f64, f64, f64);

/// A panel's value of a measured point.
type Pick = fn(&Point) -> f64;

/// What one of the two plots reads and draws.
struct Spec {
    csv: &'static str,
    png: &'static str,
    /// How to run the bench that writes the CSV.
    hint: &'static str,
    caption: &'static str,
    x_desc: &'static str,
    /// The red line: (seconds, label).
    target: (f64, &'static str),
    parse: fn(&str) -> Vec<Point>,
    /// A logarithmic size axis.
    log_x: bool,
}

/// `limit_s,case,entities,queries,updates,candidates,variables,prepare_s,solve_s,total_s,peak_rss_mib,...,cpu_s`:
/// the unlimited Watts–Strogatz rows, their scale from the case name (`ws3x`), CPU seconds (wall
/// seconds in a CSV without them).
fn parse_ws(csv: &str) -> Vec<Point> {
    let mut points = Vec::new();
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
        // CPU seconds where the bench measured them (the machine is shared), else wall.
        let time = f.get(15).unwrap_or(&f[9]);
        let (Ok(total), Ok(rss)) = (time.parse::<f64>(), f[10].parse::<f64>()) else {
            continue;
        };
        points.push((scale, total, rss));
    }
    points
}

/// `entities,candidates,prepare_s,solve_s,total_s,peak_rss_mib,optimal`.
fn parse_chain(csv: &str) -> Vec<Point> {
    csv.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            Some((
                f.first()?.parse().ok()?,
                f.get(4)?.parse().ok()?,
                f.get(5)?.parse().ok()?,
            ))
        })
        .collect()
}

const WS: Spec = Spec {
    csv: "target/advisor-bench.csv",
    png: "docs/advisor-scaling.png",
    hint: "run the bench first",
    caption: "tern advise, Watts-Strogatz",
    x_desc: "scale (7s entities, 30s queries)",
    target: (10.0, "10 s target"),
    parse: parse_ws,
    log_x: false,
};

/// `entities,...,cpu_s,limit` rows of the given limit: CPU seconds (the machine is shared, so
/// wall time says little) and peak RSS.
fn parse_limited(csv: &str, limit: &str) -> Vec<Point> {
    csv.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            if f.get(8).copied() != Some(limit) {
                return None;
            }
            Some((
                f.first()?.parse().ok()?,
                f.get(7)?.parse().ok()?,
                f.get(5)?.parse().ok()?,
            ))
        })
        .collect()
}

/// The default bound's rows.
fn parse_bound(csv: &str) -> Vec<Point> {
    parse_limited(csv, "bound")
}

/// The unbounded rows (`--enumeration-limit 0`), drawn beside the bounded ones.
fn parse_unbounded(csv: &str) -> Vec<Point> {
    parse_limited(csv, "none")
}

const BOUND: Spec = Spec {
    csv: "target/advisor-chain-bound.csv",
    png: "docs/advisor-chain-bound.png",
    hint: "run the bench with --scaling first",
    caption: "tern advise (no time limit), chain",
    x_desc: "entities in the model (log scale)",
    target: (10.0, "10 s"),
    parse: parse_bound,
    log_x: true,
};

const CHAIN: Spec = Spec {
    csv: "target/advisor-chain.csv",
    png: "docs/advisor-chain.png",
    hint: "run the bench with --scaling first",
    caption: "tern advise --time-limit 5, chain",
    x_desc: "entities in the model (log scale)",
    target: (5.0, "--time-limit 5"),
    parse: parse_chain,
    log_x: true,
};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let spec = match args.first().map(String::as_str) {
        Some("chain") => {
            args.remove(0);
            CHAIN
        }
        Some("bound") => {
            args.remove(0);
            BOUND
        }
        Some("ws") => {
            args.remove(0);
            WS
        }
        _ => WS,
    };
    let csv_path = args.first().cloned().unwrap_or_else(|| spec.csv.into());
    let png_path = args.get(1).cloned().unwrap_or_else(|| spec.png.into());
    let csv = std::fs::read_to_string(&csv_path)
        .unwrap_or_else(|e| panic!("{csv_path}: {e} ({})", spec.hint));
    let points = (spec.parse)(&csv);
    // The bound's plot also shows the enumeration without it (red), where it was measured.
    let others = if spec.png == BOUND.png {
        parse_unbounded(&csv)
    } else {
        Vec::new()
    };
    tern_core::plot::register_font().unwrap_or_else(|e| panic!("{e}"));
    let root = BitMapBackend::new(&png_path, (1000, 480)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let (left, right) = root.split_horizontally(500);
    let max_t = points
        .iter()
        .chain(&others)
        .map(|p| p.1)
        .fold(spec.target.0, f64::max)
        * 1.15;
    let max_m = points
        .iter()
        .chain(&others)
        .map(|p| p.2)
        .fold(1.0, f64::max)
        * 1.15;
    let figure = Figure {
        spec: &spec,
        points: &points,
        others: &others,
        left: &left,
        right: &right,
        max_t,
        max_m,
    };
    if spec.log_x {
        let max_x = points.iter().map(|p| p.0).fold(100.0, f64::max) * 1.3;
        let x = (20f64..max_x).log_scale();
        draw(&figure, (20.0, max_x), x.clone(), x);
    } else {
        draw(&figure, (0.5, 4.5), 0.5f64..4.5, 0.5f64..4.5);
    }
    root.present().expect("write the png");
    println!("plot written to {png_path}");
}

/// What both panels of a plot draw from: the points (and those without the bound), the two
/// halves of the picture and the top of each panel's axis.
struct Figure<'f, 'a> {
    spec: &'f Spec,
    points: &'f [Point],
    others: &'f [Point],
    left: &'f DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    right: &'f DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>,
    max_t: f64,
    max_m: f64,
}

/// Draws the run-time panel on the left and the memory panel on the right, over `span` on an
/// x axis of kind `X`.
fn draw<X>(figure: &Figure<'_, '_>, span: (f64, f64), x_left: X, x_right: X)
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let Figure {
        spec,
        points,
        others,
        left,
        right,
        max_t,
        max_m,
    } = *figure;
    let panels: [(&DrawingArea<_, _>, &str, &str, f64, Pick, X); 2] = [
        (
            left,
            "run time",
            if spec.png == CHAIN.png {
                "seconds (wall)"
            } else {
                "CPU seconds"
            },
            max_t,
            |p| p.1,
            x_left,
        ),
        (
            right,
            "peak memory",
            "MiB (peak RSS)",
            max_m,
            |p| p.2,
            x_right,
        ),
    ];
    for (area, title, unit, max, f, x) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{}: {title}", spec.caption), ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(x, 0f64..max)
            .expect("chart");
        chart
            .configure_mesh()
            .x_desc(spec.x_desc)
            .y_desc(unit)
            .draw()
            .expect("mesh");
        if !others.is_empty() {
            let data: Vec<(f64, f64)> = others.iter().map(|p| (p.0, f(p))).collect();
            let label = "no bound (--enumeration-limit 0)";
            tern_core::plot::draw_line(&mut chart, &data, MAGENTA, 4, Some(label))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let data: Vec<(f64, f64)> = points.iter().map(|p| (p.0, f(p))).collect();
        let label = (!others.is_empty()).then_some("default bound");
        tern_core::plot::draw_line(&mut chart, &data, BLUE, 4, label)
            .unwrap_or_else(|e| panic!("{e}"));
        if title == "run time" {
            let (t, label) = spec.target;
            chart
                .draw_series(LineSeries::new(vec![(span.0, t), (span.1, t)], RED))
                .expect("target")
                .label(label)
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
            tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}
