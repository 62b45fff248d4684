//! Eager `add` + `rename` over N entities on the embedded store: tern (checkpoint
//! per batch, census, lease) against a hand-written loop over the same store API,
//! side by side in one run. Prints entities/s and the ratio.
//!
//! ```sh
//! cargo bench -p tern-core --bench eager -- --entities 1000000 --rounds 3
//! ```

#![allow(clippy::expect_used, clippy::panic)] // a benchmark: any failure should stop it loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::migrate::{LeaseOptions, Migration, MigrationSet, Migrator, RunOptions};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::embedded::EmbeddedStore;
use tern_core::store::{Filter, ScanRequest, Store, Write};

const SCRIPT: &str = "add blogpost.likes = 0\nrename blogpost.text to content\n";

struct Args {
    entities: usize,
    batch: usize,
    rounds: usize,
    pushdown: bool,
}

fn args() -> Args {
    let mut a = Args {
        entities: 1_000_000,
        batch: 1000,
        rounds: 3,
        pushdown: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match arg.as_str() {
            "--entities" => a.entities = num("--entities"),
            "--batch" => a.batch = num("--batch"),
            "--rounds" => a.rounds = num("--rounds"),
            "--no-pushdown" => a.pushdown = false,
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    a
}

async fn load(store: &dyn Store, n: usize) {
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..n {
        let mut v = Map::new();
        v.insert("title".into(), Value::from(format!("post number {i}")));
        v.insert(
            "text".into(),
            Value::from("NoSQL databases are often schema-less; their data is not."),
        );
        v.insert("author".into(), Value::from(format!("user{}", i % 1000)));
        batch.push(Write::Put(Entity::new(
            Key {
                kind: "blogpost".into(),
                id: Value::Int(i as i64),
            },
            v,
        )));
        if batch.len() == 10_000 {
            store
                .write_batch(std::mem::take(&mut batch))
                .await
                .expect("load");
        }
    }
    if !batch.is_empty() {
        store.write_batch(batch).await.expect("load");
    }
}

/// The baseline: what a careful engineer writes by hand with the same store API.
async fn hand_loop(store: &dyn Store, batch: usize) -> u64 {
    let mut cursor = None;
    let mut done = 0u64;
    loop {
        let page = store
            .scan(
                "blogpost",
                ScanRequest {
                    filter: Filter::at_version(0),
                    cursor,
                    limit: batch,
                },
            )
            .await
            .expect("scan");
        let writes: Vec<Write> = page
            .entities
            .into_iter()
            .map(|e| {
                let mut new = e.clone();
                new.value.insert("likes".into(), Value::Int(0));
                if let Some(t) = new.value.remove("text") {
                    new.value.insert("content".into(), t);
                }
                new.version = 2;
                Write::Replace { expected: e, new }
            })
            .collect();
        done += writes.len() as u64;
        store.write_batch(writes).await.expect("write");
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return done,
        }
    }
}

async fn tern_up(store: Arc<dyn Store>, batch: usize, pushdown: bool) -> u64 {
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(1, "release2", "0001_release2.tern", SCRIPT).expect("script"))
        .expect("add");
    let report = Migrator::new(store, set)
        .with_run_options(RunOptions {
            batch_size: batch,
            pushdown,
            ..RunOptions::default()
        })
        .with_lease_options(LeaseOptions::default())
        .up(None)
        .await
        .expect("tern up");
    report.applied[0].counts.processed
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let a = args();
    println!(
        "eager add+rename, embedded store (redb), {} entities, batch {}, {} round(s), tern pushdown {}",
        a.entities, a.batch, a.rounds, a.pushdown
    );
    let mut ratios = Vec::new();
    for round in 0..a.rounds {
        let dir = tempfile::tempdir().expect("tempdir");
        let loop_store = EmbeddedStore::open(dir.path().join("loop.redb")).expect("open");
        let tern_store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path().join("tern.redb")).expect("open"));
        load(&loop_store, a.entities).await;
        load(tern_store.as_ref(), a.entities).await;
        // Alternate which goes first, so neither always gets the warmer cache.
        let (loop_time, tern_time, n_loop, n_tern);
        if round % 2 == 0 {
            let t = Instant::now();
            n_loop = hand_loop(&loop_store, a.batch).await;
            loop_time = t.elapsed();
            let t = Instant::now();
            n_tern = tern_up(Arc::clone(&tern_store), a.batch, a.pushdown).await;
            tern_time = t.elapsed();
        } else {
            let t = Instant::now();
            n_tern = tern_up(Arc::clone(&tern_store), a.batch, a.pushdown).await;
            tern_time = t.elapsed();
            let t = Instant::now();
            n_loop = hand_loop(&loop_store, a.batch).await;
            loop_time = t.elapsed();
        }
        assert_eq!(n_loop as usize, a.entities);
        assert_eq!(n_tern as usize, a.entities);
        let ratio = tern_time.as_secs_f64() / loop_time.as_secs_f64();
        ratios.push(ratio);
        println!(
            "round {}: hand loop {:>7.2}s ({:>9.0}/s)   tern up {:>7.2}s ({:>9.0}/s)   tern/loop {:.3}",
            round + 1,
            loop_time.as_secs_f64(),
            rate(n_loop, loop_time),
            tern_time.as_secs_f64(),
            rate(n_tern, tern_time),
            ratio
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median tern/loop time ratio: {:.3}",
        ratios[ratios.len() / 2]
    );
}
