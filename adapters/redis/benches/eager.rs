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
//! tern runs as `tern up` does without a terminal: no progress bar, so no
//! count of the entities before the stage. `--progress-count` adds that count
//! (what `tern up` does when it draws a bar).
//!
//! Uses databases 14 (tern) and 15 (loop) of the server at `TERN_BENCH_REDIS_URL`
//! (default `redis://127.0.0.1:6379`) and **flushes them** before each run.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;

use tern_core::migrate::RunOptions;
use tern_testkit::bench::{self, BenchArgs, Ratios};

mod common;
use common::{base_url, flush, open};

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

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(1_000_000, 1);
    let base = base_url();
    let (tern_url, loop_url) = (format!("{base}/14"), format!("{base}/15"));
    println!(
        "eager add+rename, redis hashes, {} entities, batch {}, {} round(s), tern pushdown {}",
        a.entities, a.batch, a.rounds, a.pushdown
    );
    let mut ratios = Ratios::new("loop");
    for round in 0..a.rounds {
        flush(&tern_url).await;
        flush(&loop_url).await;
        let tern_store = open(&tern_url).await;
        let loop_store = open(&loop_url).await;
        bench::load(tern_store.as_ref(), a.entities)
            .await
            .expect("load");
        bench::load(loop_store.as_ref(), a.entities)
            .await
            .expect("load");
        let ((n_loop, t_loop), (n_tern, t_tern)) = bench::in_turn(
            round,
            hand_loop(&loop_url, a.batch),
            bench::tern_up_with(
                Arc::clone(&tern_store),
                RunOptions {
                    batch_size: a.batch,
                    // The loop's SCAN COUNT: both sides take the same steps.
                    pushdown_batch_size: a.batch,
                    pushdown: a.pushdown,
                    ..RunOptions::default()
                },
            ),
        )
        .await;
        let n_tern = n_tern.expect("tern up");
        assert_eq!(
            n_loop as usize, a.entities,
            "the loop migrated every entity"
        );
        assert_eq!(n_tern as usize, a.entities, "tern migrated every entity");
        ratios.record(round, (n_loop, t_loop), (n_tern, t_tern));
    }
    ratios.finish();
}
