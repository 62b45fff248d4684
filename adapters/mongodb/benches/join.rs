//! `copy` and `move` with a join over N users and N posts through the join
//! index, against an `add` over the same N posts, and the safety check alone,
//! side by side in one run on a MongoDB wire-protocol server
//! (`tern_testkit::join_bench`).
//!
//! ```sh
//! TERN_BENCH_MONGODB_URL=mongodb://127.0.0.1:27017 \
//!   cargo bench -p tern-mongodb --bench join -- --entities 100000
//! ```
//!
//! Uses the database `tern_join_bench_<pid>` and drops it afterwards.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use tern_core::migrate::RunOptions;
use tern_testkit::bench::BenchArgs;
use tern_testkit::join_bench;

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(100_000, 1);
    let base = std::env::var("TERN_BENCH_MONGODB_URL")
        .unwrap_or_else(|_| "mongodb://127.0.0.1:27017".to_owned());
    assert!(
        base.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    let db = format!("tern_join_bench_{}", std::process::id());
    let url = format!("{}/{db}", base.trim_end_matches('/'));
    println!("MongoDB at {url}, batch {}", a.batch);
    let store = tern_mongodb::open(&url).await.expect("open");
    join_bench::load(store.as_ref(), a.entities)
        .await
        .expect("load");
    let options = RunOptions {
        batch_size: a.batch,
        estimate_totals: false,
        ..RunOptions::default()
    };
    let result = join_bench::run(store, a.entities, options).await;
    let client = mongodb::Client::with_uri_str(&base).await.expect("connect");
    let _ = client.database(&db).drop().await;
    result.expect("run").print();
}
