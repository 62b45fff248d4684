//! Lazy migration on the embedded store, side by side in one run:
//!
//! - the pause of installing a lazy `add` + `rename` over N entities against
//!   the eager `tern up` of the same change on the same data;
//! - up-to-date reads through the lazy client against raw `Store::get` calls of
//!   the same store (the overhead of the lazy layer on current entities).
//!
//! ```sh
//! cargo bench -p tern-core --bench lazy -- --entities 1000000 --rounds 3
//! ```

#![allow(clippy::expect_used, clippy::panic)] // a benchmark: any failure should stop it loudly

use std::sync::Arc;
use std::time::Duration;

use tern_core::lazy::LazyClient;
use tern_core::migrate::{Migration, MigrationSet, Migrator};
use tern_core::model::{Key, Value};
use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;
use tern_testkit::bench::{self, BenchArgs, SCRIPT};

async fn fresh(dir: &tempfile::TempDir, name: &str, n: usize) -> Arc<dyn Store> {
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(dir.path().join(name)).expect("open"));
    bench::load(store.as_ref(), n).await.expect("load");
    store
}

async fn install(store: Arc<dyn Store>) -> Duration {
    let mut set = MigrationSet::new();
    set.add(
        Migration::from_script(
            1,
            "release2",
            "0001_release2.tern",
            &format!("lazy\n{SCRIPT}"),
        )
        .expect("script"),
    )
    .expect("set");
    let (r, t) = bench::timed(Migrator::new(store, set).up(None)).await;
    r.expect("install");
    t
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = BenchArgs::parse(100_000, 3);
    let n = args.entities;
    let reads = n.min(100_000);
    println!("embedded store, {n} entities, {} rounds", args.rounds);
    for round in 0..args.rounds {
        let dir = tempfile::tempdir().expect("tempdir");
        let eager = fresh(&dir, "eager.redb", n).await;
        let lazy = fresh(&dir, "lazy.redb", n).await;
        let ((e, te), tl) = (
            bench::timed(bench::tern_up(Arc::clone(&eager), 1000, true)).await,
            install(Arc::clone(&lazy)).await,
        );
        e.expect("eager");
        println!(
            "round {round}: pause: eager tern up {:.3} s, lazy install {:.1} ms ({:.0}x shorter)",
            te.as_secs_f64(),
            tl.as_secs_f64() * 1e3,
            te.as_secs_f64() / tl.as_secs_f64()
        );
        // Reads of up-to-date entities (the eager store is all at v2).
        let client = LazyClient::builder(Arc::clone(&eager))
            .declare("blogpost", 2)
            .connect()
            .await
            .expect("connect");
        let keys: Vec<Key> = (0..reads)
            .map(|i| Key {
                kind: "blogpost".into(),
                id: Value::Int((i * 7919 % n) as i64),
            })
            .collect();
        let raw = async {
            for k in &keys {
                eager.get(k).await.expect("get");
            }
        };
        let through = async {
            for k in &keys {
                client.get(k).await.expect("get");
            }
        };
        let ((_, tr), (_, tc)) = bench::in_turn(round, raw, through).await;
        println!(
            "round {round}: {reads} up-to-date reads: raw {:.0}/s, lazy client {:.0}/s, overhead {:+.1}%",
            reads as f64 / tr.as_secs_f64(),
            reads as f64 / tc.as_secs_f64(),
            (tc.as_secs_f64() / tr.as_secs_f64() - 1.0) * 100.0
        );
    }
}
