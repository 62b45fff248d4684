//! Eager `add` + `rename` over N hash entities in Redis: `tern up` (lease,
//! checkpoint per batch, progress count, census) against a hand-written
//! pipelined SCAN + HGET / HSET + HDEL loop with the same driver, side by side
//! in one run. Prints keys/s and the ratio.
//!
//! ```sh
//! scripts/servers.sh start redis
//! cargo bench -p tern-redis --bench eager -- --entities 1000000 --rounds 1
//! ```
//!
//! Uses databases 14 (tern) and 15 (loop) of the server at `TERN_BENCH_REDIS_URL`
//! (default `redis://127.0.0.1:6379`) and **flushes them** before each run.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::migrate::{LeaseOptions, Migration, MigrationSet, Migrator, RunOptions};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};

const SCRIPT: &str = "add blogpost.likes = 0\nrename blogpost.text to content\n";

struct Args {
    entities: usize,
    batch: usize,
    rounds: usize,
}

fn args() -> Args {
    let mut a = Args {
        entities: 1_000_000,
        batch: 1000,
        rounds: 1,
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
            _ => {}
        }
    }
    a
}

fn base_url() -> String {
    let url = std::env::var("TERN_BENCH_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    assert!(
        url.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    url.trim_end_matches('/').to_owned()
}

async fn flush(url: &str) {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    // ASYNC: a synchronous flush of a million keys outlasts the client's timeout.
    let _: () = redis::cmd("FLUSHDB")
        .arg("ASYNC")
        .query_async(&mut conn)
        .await
        .expect("flushdb");
}

async fn load(store: &dyn Store, n: usize) {
    let mut batch = Vec::with_capacity(5_000);
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
        if batch.len() == 5_000 {
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

/// The baseline: SCAN a step of keys, pipeline HGET of `text`, then pipeline
/// HSET (likes, content, version) + HDEL text. No checkpoint, no lease, no
/// census, no compare-and-set.
async fn hand_loop(url: &str, batch: usize) -> u64 {
    let client = redis::Client::open(url).expect("url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let mut cursor: u64 = 0;
    let mut done = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("blogpost:*")
            .arg("COUNT")
            .arg(batch)
            .query_async(&mut conn)
            .await
            .expect("scan");
        if !keys.is_empty() {
            let mut read = redis::pipe();
            for k in &keys {
                read.cmd("HGET").arg(k).arg("text");
            }
            let texts: Vec<Option<String>> = read.query_async(&mut conn).await.expect("hget");
            let mut write = redis::pipe();
            for (k, text) in keys.iter().zip(texts) {
                let Some(text) = text else { continue };
                write
                    .cmd("HSET")
                    .arg(k)
                    .arg("likes")
                    .arg("0")
                    .arg("content")
                    .arg(text)
                    .arg("_v")
                    .arg("2")
                    .ignore();
                write.cmd("HDEL").arg(k).arg("text").ignore();
                done += 1;
            }
            let _: () = write.query_async(&mut conn).await.expect("hset");
        }
        if next == 0 {
            return done;
        }
        cursor = next;
    }
}

async fn tern_up(store: Arc<dyn Store>, batch: usize) -> u64 {
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(1, "release2", "0001_release2.tern", SCRIPT).expect("script"))
        .expect("add");
    let report = Migrator::new(store, set)
        .with_run_options(RunOptions {
            batch_size: batch,
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
    let base = base_url();
    let (tern_url, loop_url) = (format!("{base}/14"), format!("{base}/15"));
    println!(
        "eager add+rename, redis hashes, {} entities, batch {}, {} round(s)",
        a.entities, a.batch, a.rounds
    );
    for round in 0..a.rounds {
        flush(&tern_url).await;
        flush(&loop_url).await;
        let tern_store = tern_redis::open(&tern_url).await.expect("open");
        let loop_store = tern_redis::open(&loop_url).await.expect("open");
        load(tern_store.as_ref(), a.entities).await;
        load(loop_store.as_ref(), a.entities).await;

        let started = Instant::now();
        let n_loop = hand_loop(&loop_url, a.batch).await;
        let t_loop = started.elapsed();
        let started = Instant::now();
        let n_tern = tern_up(Arc::clone(&tern_store), a.batch).await;
        let t_tern = started.elapsed();
        assert_eq!(n_tern as usize, a.entities, "tern migrated every entity");
        println!(
            "round {round}: hand loop {n_loop} keys in {:.2?} ({:.0}/s); tern up {n_tern} in {:.2?} ({:.0}/s); tern/loop {:.2}",
            t_loop,
            rate(n_loop, t_loop),
            t_tern,
            rate(n_tern, t_tern),
            t_tern.as_secs_f64() / t_loop.as_secs_f64()
        );
    }
}
