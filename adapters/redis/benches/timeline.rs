//! An application's throughput and p99 latency across a schema change on
//! Redis, eager against lazy ([KV]'s Amico/redisfs experiment), as a timeline.
//!
//! N blog posts (hashes); 8 application tasks read random posts through the
//! lazy client and write one in five back (read, then `put` of what was read).
//! After `--before` seconds the application's code changes to
//! `add blogpost.likes = 0` + `rename blogpost.text to content`:
//!
//! - **eager**: the application stops, `tern up` migrates every post (lease,
//!   batches of 1,000 pushed down into Redis, checkpoints, census), then the
//!   new code starts: the pause is the whole run;
//! - **lazy**: the application stops, `tern up` installs the change `lazy`,
//!   the new code starts at once, and a `tern sweep` runs concurrently until
//!   every post is migrated; a post the application reads first is migrated by
//!   that read.
//!
//! `--sweep-rate N` caps the sweep at N entities per second (default: no cap).
//! Both run `--after` seconds past the end of the migration. Completed
//! operations are counted per 100 ms bucket with the p99 of their latencies;
//! the buckets go to a CSV (`--csv`, default `target/lazy-timeline.csv`) that
//! `timeline-plot` draws:
//!
//! ```sh
//! scripts/servers.sh start redis
//! cargo bench -p tern-redis --bench timeline -- --entities 500000
//! cargo run --release -p tern-testkit --features plot --bin timeline-plot -- \
//!     target/lazy-timeline.csv docs/lazy-timeline.png
//! ```
//!
//! Uses database 15 of the server at `TERN_BENCH_REDIS_URL` (default
//! `redis://127.0.0.1:6379`) and **flushes it** before each scenario and at the end.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tern_core::lazy::{LazyClient, SweepOptions, sweep};
use tern_core::migrate::LeaseOptions;
use tern_core::model::{Key, Value};
use tern_core::store::Store;
use tern_testkit::bench::{self, BenchArgs};
use tern_testkit::lazy_bench;

mod common;
use common::{base_url, flush};

const TASKS: usize = 8;
const BUCKET_MS: u64 = 100;

/// (milliseconds since the scenario started, latency in microseconds) of each
/// completed operation.
type Samples = Arc<Mutex<Vec<(u64, u64)>>>;

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// One application task: reads (and one in five writes back) random posts
/// until `stop`.
async fn app_task(
    client: Arc<LazyClient>,
    n: usize,
    start: Instant,
    stop: Arc<AtomicBool>,
    samples: Samples,
    seed: u64,
) {
    let mut rng = seed | 1;
    let mut mine = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let r = next(&mut rng);
        let key = Key {
            kind: "blogpost".into(),
            id: Value::Int((r % n as u64) as i64),
        };
        let t = Instant::now();
        let got = client
            .get(&key)
            .await
            .expect("read")
            .expect("a post missing");
        if r >> 60 < 3 {
            client.put(&key, got.value).await.expect("write");
        }
        mine.push((
            start.elapsed().as_millis() as u64,
            t.elapsed().as_micros() as u64,
        ));
    }
    samples.lock().expect("samples").extend(mine);
}

/// Runs the application with a client declaring `version` until `stop`.
async fn app(
    store: &Arc<dyn Store>,
    version: u64,
    n: usize,
    start: Instant,
    samples: &Samples,
) -> (Arc<AtomicBool>, Vec<tokio::task::JoinHandle<()>>) {
    let client = Arc::new(
        LazyClient::builder(Arc::clone(store))
            .declare("blogpost", version)
            .connect()
            .await
            .expect("lazy client"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = (0..TASKS)
        .map(|i| {
            tokio::spawn(app_task(
                Arc::clone(&client),
                n,
                start,
                Arc::clone(&stop),
                Arc::clone(samples),
                0x9E37_79B9_7F4A_7C15 ^ (i as u64 + version * 100),
            ))
        })
        .collect();
    (stop, tasks)
}

async fn stop_app((stop, tasks): (Arc<AtomicBool>, Vec<tokio::task::JoinHandle<()>>)) {
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("app task");
    }
}

/// What one scenario measured.
struct Scenario {
    name: &'static str,
    /// When (ms) the application's code changed.
    change_ms: u64,
    /// The application's pause (no operation possible), ms.
    pause_ms: u64,
    /// When (ms) the migration (the eager run, or the sweep) ended.
    migrated_ms: u64,
    samples: Vec<(u64, u64)>,
}

async fn scenario(
    url: &str,
    sweep_rate: Option<f64>,
    name: &'static str,
    store: Arc<dyn Store>,
    n: usize,
    before: Duration,
    after: Duration,
) -> Scenario {
    let samples: Samples = Arc::default();
    let start = Instant::now();
    let old = app(&store, 0, n, start, &samples).await;
    tokio::time::sleep(before).await;
    stop_app(old).await;
    let change_ms = start.elapsed().as_millis() as u64;
    let (pause_ms, migrated_ms, new) = if name == "eager" {
        bench::tern_up(Arc::clone(&store), 1000, true)
            .await
            .expect("tern up");
        let pause = start.elapsed().as_millis() as u64 - change_ms;
        let new = app(&store, 2, n, start, &samples).await;
        (pause, change_ms + pause, new)
    } else {
        lazy_bench::install(Arc::clone(&store))
            .await
            .expect("install");
        let pause = start.elapsed().as_millis() as u64 - change_ms;
        let new = app(&store, 2, n, start, &samples).await;
        // `tern sweep` is a process of its own: here a thread with its own runtime
        // and its own store connection, so it does not share the application's
        // worker threads.
        let url = url.to_owned();
        let sweeper = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let own = common::open(&url).await;
                sweep::sweep(
                    own,
                    &LeaseOptions::default(),
                    &BTreeMap::new(),
                    &SweepOptions {
                        max_rate: sweep_rate,
                        ..SweepOptions::default()
                    },
                )
                .await
                .expect("sweep")
            })
        });
        let report = tokio::task::spawn_blocking(move || sweeper.join().expect("sweep thread"))
            .await
            .expect("join");
        println!("lazy: sweep migrated {:?}", report);
        (pause, start.elapsed().as_millis() as u64, new)
    };
    tokio::time::sleep(after).await;
    stop_app(new).await;
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));
    Scenario {
        name,
        change_ms,
        pause_ms,
        migrated_ms,
        samples,
    }
}

/// The p99 of latencies in microseconds, in milliseconds (0 for none).
fn p99_ms(mut lats: Vec<u64>) -> f64 {
    lats.sort_unstable();
    let at = (lats.len() * 99).div_ceil(100).saturating_sub(1);
    lats.get(at).copied().unwrap_or(0) as f64 / 1000.0
}

/// Operations per second and their p99 (ms) among the samples of `[from, to)` ms.
fn window(samples: &[(u64, u64)], from: u64, to: u64) -> (f64, f64) {
    let lats: Vec<u64> = samples
        .iter()
        .filter(|(t, _)| *t >= from && *t < to)
        .map(|(_, l)| *l)
        .collect();
    let rate = lats.len() as f64 * 1000.0 / to.saturating_sub(from).max(1) as f64;
    (rate, p99_ms(lats))
}

/// Per bucket: (start ms, operations per second, p99 latency in ms).
fn buckets(samples: &[(u64, u64)], end_ms: u64) -> Vec<(u64, f64, f64)> {
    let mut by: Vec<Vec<u64>> = vec![Vec::new(); (end_ms / BUCKET_MS + 1) as usize];
    for (t, lat) in samples {
        if let Some(b) = by.get_mut((t / BUCKET_MS) as usize) {
            b.push(*lat);
        }
    }
    by.into_iter()
        .enumerate()
        .map(|(b, lats)| {
            let rate = lats.len() as f64 * 1000.0 / BUCKET_MS as f64;
            (b as u64 * BUCKET_MS, rate, p99_ms(lats))
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = BenchArgs::parse(500_000, 1);
    let secs = |name: &str, default: u64| {
        Duration::from_secs(args.value(name).map_or(default, |v| {
            v.parse().unwrap_or_else(|_| panic!("{name} needs seconds"))
        }))
    };
    let before = secs("--before", 3);
    let after = secs("--after", 3);
    // Relative to the workspace (cargo runs a bench in its package's folder).
    let csv = args.value("--csv").map_or_else(
        || {
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/lazy-timeline.csv"
            )
            .to_owned()
        },
        str::to_owned,
    );
    let sweep_rate: Option<f64> = args
        .value("--sweep-rate")
        .map(|v| v.parse().expect("--sweep-rate needs entities per second"));
    let url = format!("{}/15", base_url());
    let mut lines = vec!["scenario,t_ms,ops_per_s,p99_ms,change_ms,migrated_ms".to_owned()];
    println!(
        "| scenario | pause | migration ends after | ops/s before | ops/s during | ops/s after | p99 before | p99 during | p99 after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for name in ["eager", "lazy"] {
        flush(&url).await;
        let store = common::open(&url).await;
        bench::load(store.as_ref(), args.entities)
            .await
            .expect("load");
        let s = scenario(&url, sweep_rate, name, store, args.entities, before, after).await;
        let end = s.samples.iter().map(|(t, _)| *t).max().unwrap_or(0);
        for (t, rate, p99) in buckets(&s.samples, end) {
            lines.push(format!(
                "{},{t},{rate:.0},{p99:.3},{},{}",
                s.name, s.change_ms, s.migrated_ms
            ));
        }
        let (b0, b1) = (
            s.change_ms.saturating_sub(before.as_millis() as u64) + 500,
            s.change_ms,
        );
        let (d0, d1) = (s.change_ms, s.migrated_ms.max(s.change_ms + 1));
        let (a0, a1) = (s.migrated_ms, end);
        let (before, during, after) = (
            window(&s.samples, b0, b1),
            window(&s.samples, d0, d1),
            window(&s.samples, a0, a1),
        );
        println!(
            "| {} | {} ms | {:.2} s | {:.0} | {:.0} | {:.0} | {:.2} ms | {:.2} ms | {:.2} ms |",
            s.name,
            s.pause_ms,
            (s.migrated_ms - s.change_ms) as f64 / 1000.0,
            before.0,
            during.0,
            after.0,
            before.1,
            during.1,
            after.1,
        );
    }
    flush(&url).await;
    std::fs::write(&csv, lines.join("\n") + "\n").expect("write the csv");
    println!(
        "timeline written to {csv} ({} entities, {TASKS} application tasks)",
        args.entities
    );
}
