//! Lazy migration on Redis hashes, side by side in one run
//! (`tern_testkit::lazy_bench`): the install pause of a lazy `add` + `rename`
//! over N entities against the eager `tern up` of the same change on the same
//! data, and up-to-date reads through the lazy client against raw
//! `Store::get` calls of the same store (the same driver and connection).
//!
//! ```sh
//! scripts/servers.sh start redis
//! cargo bench -p tern-redis --bench lazy -- --entities 1000000 --rounds 3
//! ```
//!
//! Uses databases 12 (eager) and 13 (lazy) of the server at
//! `TERN_BENCH_REDIS_URL` (default `redis://127.0.0.1:6379`) and **flushes
//! them** before each round and at the end.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;

use tern_core::store::Store;
use tern_testkit::bench::BenchArgs;
use tern_testkit::lazy_bench;

fn base_url() -> String {
    let url = std::env::var("TERN_BENCH_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    assert!(
        url.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    url.trim_end_matches('/').to_owned()
}

fn db_url(name: &str) -> String {
    let db = if name == "eager" { 12 } else { 13 };
    format!("{}/{db}", base_url())
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = BenchArgs::parse(100_000, 3);
    println!(
        "Redis hashes at {}/12 (eager) and /13 (lazy), {} entities, {} rounds",
        base_url(),
        args.entities,
        args.rounds
    );
    let fresh = |name: &'static str| async move {
        let url = db_url(name);
        flush(&url).await;
        let config = tern_redis::RedisConfig::from_url(&url).expect("url");
        let store: Arc<dyn Store> =
            Arc::new(tern_redis::RedisStore::connect(config).await.expect("open"));
        store
    };
    let result = lazy_bench::run(fresh, args.entities, args.rounds, 1000).await;
    flush(&db_url("eager")).await;
    flush(&db_url("lazy")).await;
    result.expect("bench");
}
