//! Lazy migration on the embedded store, side by side in one run
//! (`tern_testkit::lazy_bench`): the install pause of a lazy `add` + `rename`
//! over N entities against the eager `tern up` of the same change on the same
//! data, and up-to-date reads through the lazy client against raw
//! `Store::get` calls of the same store.
//!
//! ```sh
//! cargo bench -p tern-core --bench lazy -- --entities 1000000 --rounds 3
//! ```

#![allow(clippy::expect_used, clippy::panic)] // a benchmark: any failure should stop it loudly

use std::sync::Arc;

use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;
use tern_testkit::bench::BenchArgs;
use tern_testkit::lazy_bench;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = BenchArgs::parse(100_000, 3);
    println!(
        "embedded store, {} entities, {} rounds",
        args.entities, args.rounds
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut round = 0usize;
    let fresh = |name: &'static str| {
        round += 1;
        let path = dir.path().join(format!("{name}-{round}.redb"));
        async move {
            let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(path).expect("open"));
            store
        }
    };
    lazy_bench::run(fresh, args.entities, args.rounds, 1000)
        .await
        .expect("bench");
}
