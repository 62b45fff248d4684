//! The server pause a big container costs (#34 item 6): a 200,000-field hash
//! migrated on its first read through the lazy client, inside Redis (one
//! script) and on the client's path (`HGETALL`, then the compare-and-set
//! script), while a second client sends `PING` every millisecond. Reports each
//! read's duration and the longest `PING` wait during it, against the longest
//! `PING` wait of the same prober with no migration running (the baseline), as
//! ratios, side by side in one run.
//!
//! ```sh
//! TERN_BENCH_REDIS_URL=redis://127.0.0.1:6379 \
//!   cargo bench -p tern-redis --bench big_container -- --fields 200000 --rounds 3
//! ```
//!
//! Uses its own key prefix (`tern_bench_big_<pid>`) of the server at
//! `TERN_BENCH_REDIS_URL` and deletes it at the end; flushes nothing.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tern_core::lazy::LazyClient;
use tern_core::model::{Key, Value};

mod common;
use common::{base_url, connect, delete_prefix, open};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

/// Sends `PING` every millisecond until `stop`; the longest wait for an answer.
async fn probe(url: String, stop: Arc<AtomicBool>) -> Duration {
    // No response timeout: the pause measured outlasts the driver's default.
    let mut conn = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .expect("connect");
    let mut longest = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .expect("ping");
        longest = longest.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    longest
}

/// Writes the hash at version 0: `fields` fields.
async fn write_hash(url: &str, key: &str, fields: usize) {
    let mut conn = connect(url).await;
    let _: () = redis::cmd("DEL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("del");
    for chunk in (0..fields).collect::<Vec<_>>().chunks(10_000) {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(key);
        for i in chunk {
            cmd.arg(format!("f{i}")).arg(i);
        }
        let _: () = cmd.query_async(&mut conn).await.expect("hset");
    }
}

/// One lazy read of the stale hash while the prober runs: (read, longest PING).
async fn timed_read(url: &str, client: &LazyClient, key: &Key) -> (Duration, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let prober = tokio::spawn(probe(url.to_owned(), Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let t = Instant::now();
    let got = client.get(key).await.expect("read").expect("present");
    let read = t.elapsed();
    assert_eq!(got.version, 1);
    assert_eq!(got.value.get("likes"), Some(&Value::Int(0)));
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.store(true, Ordering::Relaxed);
    (read, prober.await.expect("prober"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fields = arg("--fields", 200_000);
    let rounds = arg("--rounds", 3);
    let prefix = format!("tern_bench_big_{}", std::process::id());
    let url = format!("{}/?prefix={prefix}", base_url());
    let raw_key = format!("{prefix}:post:big");
    let store = open(&url).await;
    tern_testkit::lazy::up(&store, &[(1, "lazy\nadd post.likes = 0\n")])
        .await
        .expect("install");
    let key = Key::new("post", "big").expect("key");
    let client = |in_store: bool| {
        LazyClient::builder(Arc::clone(&store))
            .declare("post", 1)
            .migrate_in_store(in_store)
            .connect()
    };
    let in_store = client(true).await.expect("client");
    let on_client = client(false).await.expect("client");
    println!(
        "a {fields}-field hash migrated on its first read (add post.likes = 0), {rounds} rounds"
    );
    println!(
        "round  baseline PING max  in-store read / PING max (ratio)  client-path read / PING max (ratio)"
    );
    for round in 1..=rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let prober = tokio::spawn(probe(base_url(), Arc::clone(&stop)));
        tokio::time::sleep(Duration::from_millis(500)).await;
        stop.store(true, Ordering::Relaxed);
        let baseline = prober.await.expect("prober");
        write_hash(&base_url(), &raw_key, fields).await;
        let (r1, p1) = timed_read(&base_url(), &in_store, &key).await;
        write_hash(&base_url(), &raw_key, fields).await;
        let (r2, p2) = timed_read(&base_url(), &on_client, &key).await;
        let ratio = |p: Duration| p.as_secs_f64() / baseline.as_secs_f64().max(1e-6);
        println!(
            "{round:>5}  {:>17.1?}  {:>9.1?} / {:>9.1?} ({:>6.0}x)  {:>11.1?} / {:>9.1?} ({:>6.0}x)",
            baseline,
            r1,
            p1,
            ratio(p1),
            r2,
            p2,
            ratio(p2)
        );
    }
    delete_prefix(&base_url(), &prefix).await;
}
