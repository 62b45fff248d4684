//! Eager `add` + `rename` over N entities on the embedded store: tern (checkpoint
//! per batch, census, lease) against a hand-written loop over the same store API,
//! side by side in one run. Prints entities/s and the ratio.
//!
//! ```sh
//! cargo bench -p tern-core --bench eager -- --entities 1000000 --rounds 3
//! ```

#![allow(clippy::expect_used, clippy::panic)] // a benchmark: any failure should stop it loudly

use std::sync::Arc;

use tern_core::model::Value;
use tern_core::store::embedded::EmbeddedStore;
use tern_core::store::{Filter, ScanRequest, Store, Write};
use tern_core::testing::bench::{self, BenchArgs, Ratios};

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

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(1_000_000, 3);
    println!(
        "eager add+rename, embedded store (redb), {} entities, batch {}, {} round(s), tern pushdown {}",
        a.entities, a.batch, a.rounds, a.pushdown
    );
    let mut ratios = Ratios::new("loop");
    for round in 0..a.rounds {
        let dir = tempfile::tempdir().expect("tempdir");
        let loop_store = EmbeddedStore::open(dir.path().join("loop.redb")).expect("open");
        let tern_store: Arc<dyn Store> =
            Arc::new(EmbeddedStore::open(dir.path().join("tern.redb")).expect("open"));
        bench::load(&loop_store, a.entities).await.expect("load");
        bench::load(tern_store.as_ref(), a.entities)
            .await
            .expect("load");
        let ((n_loop, t_loop), (n_tern, t_tern)) = bench::in_turn(
            round,
            hand_loop(&loop_store, a.batch),
            bench::tern_up(Arc::clone(&tern_store), a.batch, a.pushdown),
        )
        .await;
        let n_tern = n_tern.expect("tern up");
        assert_eq!(n_loop as usize, a.entities);
        assert_eq!(n_tern as usize, a.entities);
        ratios.record(round, (n_loop, t_loop), (n_tern, t_tern));
    }
    ratios.finish();
}
