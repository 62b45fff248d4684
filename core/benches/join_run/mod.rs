//! The join benchmark itself, shared by `join` (mimalloc, as the `tern`
//! binary) and `join-system` (the system allocator).

use std::sync::Arc;

use tern_core::migrate::RunOptions;
use tern_core::store::embedded::{DEFAULT_CACHE_BYTES, EmbeddedOptions, EmbeddedStore};
use tern_testkit::bench::BenchArgs;
use tern_testkit::join_bench::{self, JoinTimes};

async fn one(n: usize, options: &RunOptions, store_options: EmbeddedOptions) -> JoinTimes {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(
        EmbeddedStore::open_with(dir.path().join("bench.redb"), store_options).expect("open"),
    );
    join_bench::load(store.as_ref(), n).await.expect("load");
    join_bench::run(store, n, options.clone())
        .await
        .expect("run")
}

#[cfg(feature = "plot")]
fn plot(path: &str, points: &[JoinTimes]) {
    use plotters::prelude::*;
    tern_core::plot::register_font().unwrap_or_else(|e| panic!("{e}"));
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).expect("fill");
    let max_n = points.iter().map(|p| p.n).max().unwrap_or(1) as f64;
    let max_t = points
        .iter()
        .map(|p| p.mv.max(p.copy).max(p.add).max(p.add_client).as_secs_f64())
        .fold(0.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "tern up on the embedded store: time against N users + N posts",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..max_n * 1.05, 0f64..max_t)
        .expect("chart");
    chart
        .configure_mesh()
        .x_desc("N (users, and posts)")
        .y_desc("seconds")
        .draw()
        .expect("mesh");
    type Series = (&'static str, RGBColor, fn(&JoinTimes) -> f64);
    let series: [Series; 4] = [
        ("add blogpost.likes (baseline)", BLACK, |p| {
            p.add.as_secs_f64()
        }),
        ("safety check alone", GREEN, |p| p.check.as_secs_f64()),
        ("copy user.email ... where join", BLUE, |p| {
            p.copy.as_secs_f64()
        }),
        ("move user.url ... where join", RED, |p| p.mv.as_secs_f64()),
    ];
    for (name, color, f) in series {
        let data: Vec<(f64, f64)> = points.iter().map(|p| (p.n as f64, f(p))).collect();
        chart
            .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))
            .expect("line")
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(
                data.into_iter()
                    .map(|(x, y)| Circle::new((x, y), 4, color.filled())),
            )
            .expect("points");
    }
    tern_core::plot::draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
        .unwrap_or_else(|e| panic!("{e}"));
    root.present().expect("write the png");
    println!("plot written to {path}");
}

#[cfg(not(feature = "plot"))]
fn plot(path: &str, _: &[JoinTimes]) {
    panic!("--plot {path} needs `--features plot`");
}

/// Runs the benchmark from the command line; `allocator` names the global
/// allocator the binary was built with (printed with the results).
pub(crate) async fn main(allocator: &str) {
    let a = BenchArgs::parse(1_000_000, 1);
    let options = RunOptions {
        batch_size: a.batch,
        estimate_totals: false,
        join_memory: a
            .value("--join-memory")
            .map_or(RunOptions::default().join_memory, |v| {
                v.parse().expect("--join-memory needs a number of bytes")
            }),
        ..RunOptions::default()
    };
    let store_options = EmbeddedOptions {
        cache_bytes: a.value("--cache-mb").map_or(DEFAULT_CACHE_BYTES, |v| {
            v.parse::<usize>().expect("--cache-mb needs a number") << 20
        }),
    };
    if let Some(n) = a.value("--index-only") {
        let n: usize = n.parse().expect("--index-only needs a number");
        let p = join_bench::index_only(n, options.join_memory).expect("probe");
        println!(
            "join index alone ({allocator}): {} sources in {:.2}s ({:.0}/s), {} targets resolved in {:.2}s, {} spills, budget {} MB, peak RSS {} MB",
            p.n,
            p.build.as_secs_f64(),
            p.n as f64 / p.build.as_secs_f64(),
            p.n,
            p.lookup.as_secs_f64(),
            p.spills,
            options.join_memory >> 20,
            p.max_rss.map_or(0, |b| b >> 20)
        );
        return;
    }
    let points: Vec<usize> = match a.value("--points") {
        Some(list) => list
            .split(',')
            .map(|n| n.trim().parse().expect("--points needs numbers"))
            .collect(),
        None => vec![a.entities],
    };
    println!(
        "embedded store (redb, cache {} MiB), batch {}, join memory {} bytes, allocator {allocator}; each line a fresh store with N users and N posts",
        store_options.cache_bytes >> 20,
        options.batch_size,
        options.join_memory
    );
    let mut results = Vec::new();
    for n in points {
        let times = one(n, &options, store_options).await;
        times.print();
        results.push(times);
        // Drawn after every point, so a long run interrupted still leaves its curve.
        if let Some(path) = a.value("--plot") {
            plot(path, &results);
        }
    }
}
