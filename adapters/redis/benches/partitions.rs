//! Store-side scaling of partitions on Redis: a kind of N hash entities split
//! in `--partitions` partitions, rewritten by W workers (1, 2, 4, 8, 16) that
//! each take the next free partition, scan it in pages of `--batch` and write
//! every entity back with the store's compare-and-set (version + 1), as the
//! engine's workers do. Side by side in one run; prints entities/s, the
//! speedup over one worker and min(W x one worker, best measured). With
//! `--delay-ms D`, every store call first sleeps D ms (two for a scan page:
//! its SCAN and its read; one for a write), standing for a network between
//! hosts.
//!
//! ```sh
//! cargo bench -p tern-redis --bench partitions -- --entities 20000 --delay-ms 1
//! TERN_BENCH_REDIS_URL='redis://127.0.0.1:7001/?cluster=1' cargo bench -p tern-redis --bench partitions
//! ```
//!
//! A minimal driver over the `Partitions` facet: to be switched to the
//! engine's `tern up --workers N` once that lands. Writes under a prefix of
//! its own (`tern_bench_parts_<pid>`) and deletes it afterwards.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Filter, ScanRequest, Store, Write, WriteOutcome};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn pause(ms: u64, times: u32) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms) * times).await;
    }
}

/// One pass: `workers` tasks over the partitions; entities advanced.
async fn pass(
    store: Arc<dyn Store>,
    kind: &str,
    parts: usize,
    workers: usize,
    batch: usize,
    delay: u64,
) -> u64 {
    let split = Arc::new(
        store
            .features()
            .partitions
            .unwrap()
            .split(kind, parts)
            .await
            .unwrap(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let advanced = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (store, split, next, advanced, kind) = (
            Arc::clone(&store),
            Arc::clone(&split),
            Arc::clone(&next),
            Arc::clone(&advanced),
            kind.to_owned(),
        );
        tasks.push(tokio::spawn(async move {
            let parts = store.features().partitions.unwrap();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(p) = split.get(i) else { return };
                let mut cursor = None;
                loop {
                    pause(delay, 2).await;
                    let page = parts
                        .scan_partition(
                            &kind,
                            p,
                            ScanRequest {
                                filter: Filter::all(),
                                cursor,
                                limit: batch,
                            },
                        )
                        .await
                        .unwrap();
                    let writes: Vec<Write> = page
                        .entities
                        .into_iter()
                        .filter(|e| e.version % 2 == 0)
                        .map(|e| {
                            let mut new = e.clone();
                            new.version += 1;
                            Write::Replace { expected: e, new }
                        })
                        .collect();
                    if !writes.is_empty() {
                        pause(delay, 1).await;
                        let out = store.write_batch(writes).await.unwrap();
                        let n = out.iter().filter(|o| **o == WriteOutcome::Applied).count();
                        advanced.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    cursor = page.cursor;
                    if cursor.is_none() {
                        break;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    advanced.load(Ordering::Relaxed)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let entities = arg("--entities", 20_000);
    let delay = arg("--delay-ms", 0);
    let parts = usize::try_from(arg("--partitions", 64)).unwrap();
    let batch = usize::try_from(arg("--batch", 100)).unwrap();
    let base =
        std::env::var("TERN_BENCH_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}prefix=tern_bench_parts_{}", std::process::id());
    let store = tern_redis::open(&url).await.expect("opening the store");
    let kind = "item";
    let all: Vec<Write> = (0..i64::try_from(entities).unwrap())
        .map(|i| {
            let value: Map = [("n".to_owned(), Value::Int(i))].into();
            Write::Put(Entity::new(Key::new(kind, i).unwrap(), value))
        })
        .collect();
    for chunk in all.chunks(1000) {
        store.write_batch(chunk.to_vec()).await.unwrap();
    }
    println!(
        "redis {base}: {entities} entities, {parts} partitions, batch {batch}, delay {delay} ms per round trip"
    );
    println!("workers  entities/s  speedup  min(Wx1, best)");
    let mut one = 0.0;
    let mut rows = Vec::new();
    // Each pass moves every entity one version on: from even to odd, then odd to even.
    for (round, workers) in [1usize, 2, 4, 8, 16].into_iter().enumerate() {
        let started = Instant::now();
        let n = pass(Arc::clone(&store), kind, parts, workers, batch, delay).await;
        let rate = n as f64 / started.elapsed().as_secs_f64();
        assert_eq!(n, entities, "pass {round}: every entity advanced once");
        // Next pass: back to even versions.
        let back: Vec<Write> = (0..i64::try_from(entities).unwrap())
            .map(|i| {
                let value: Map = [("n".to_owned(), Value::Int(i))].into();
                Write::Put(Entity::new(Key::new(kind, i).unwrap(), value))
            })
            .collect();
        for chunk in back.chunks(1000) {
            store.write_batch(chunk.to_vec()).await.unwrap();
        }
        if workers == 1 {
            one = rate;
        }
        rows.push((workers, rate));
    }
    let best = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    for (workers, rate) in rows {
        println!(
            "{workers:>7}  {rate:>10.0}  {:>6.2}x  {:>10.0}",
            rate / one,
            (workers as f64 * one).min(best)
        );
    }
    let deletes: Vec<Write> = (0..i64::try_from(entities).unwrap())
        .map(|i| Write::Delete(Key::new(kind, i).unwrap()))
        .collect();
    for chunk in deletes.chunks(1000) {
        store.write_batch(chunk.to_vec()).await.unwrap();
    }
}
