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

use tern_testkit::bench::BenchArgs;
use tern_testkit::lazy_bench;

mod common;
use common::{base_url, flush};

fn db_url(name: &str) -> String {
    let db = if name == "eager" { 12 } else { 13 };
    format!("{}/{db}", base_url())
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
        common::open(&url).await
    };
    let result = lazy_bench::run(fresh, args.entities, args.rounds, 1000).await;
    flush(&db_url("eager")).await;
    flush(&db_url("lazy")).await;
    result.expect("bench");
}
