//! `copy` and `move` with a join over N users and N posts through the join
//! index, against an `add` over the same N posts, and the safety check alone,
//! side by side in one run on Redis hashes (`tern_testkit::join_bench`).
//!
//! ```sh
//! scripts/servers.sh start redis
//! cargo bench -p tern-redis --bench join -- --entities 100000
//! ```
//!
//! Uses the key prefix `tjoin<pid>` in database 0 of the server at
//! `TERN_BENCH_REDIS_URL` (default `redis://127.0.0.1:6379`) and deletes
//! exactly those keys afterwards.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use tern_core::migrate::RunOptions;
use tern_testkit::bench::BenchArgs;
use tern_testkit::join_bench;

mod common;
use common::delete_prefix;

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(100_000, 1);
    let base = std::env::var("TERN_BENCH_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    assert!(
        base.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    let base = format!("{}/0", base.trim_end_matches('/'));
    let prefix = format!("tjoin{}", std::process::id());
    let url = format!("{base}?prefix={prefix}");
    println!("Redis hashes at {url}, batch {}", a.batch);
    let config = tern_redis::RedisConfig::from_url(&url).expect("url");
    let store: std::sync::Arc<dyn tern_core::store::Store> =
        std::sync::Arc::new(tern_redis::RedisStore::connect(config).await.expect("open"));
    join_bench::load(store.as_ref(), a.entities)
        .await
        .expect("load");
    let options = RunOptions {
        batch_size: a.batch,
        estimate_totals: false,
        ..RunOptions::default()
    };
    let result = join_bench::run(store, a.entities, options).await;
    delete_prefix(&base, &prefix).await;
    result.expect("run").print();
}
