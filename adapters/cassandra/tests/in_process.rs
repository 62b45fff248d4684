//! The adapter against an in-process tern-cql-server on an ephemeral loopback port: the store
//! contract (`conformance::run_all`) and the concurrent-writer guarantee, with no setup.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tern_core::store::Store;
use tern_testkit::battery::Backend;

/// A server of its own and a fresh keyspace per store.
#[derive(Debug)]
struct InProcess {
    addr: std::net::SocketAddr,
    next: AtomicU64,
}

impl InProcess {
    async fn start() -> InProcess {
        let addr = tern_cql_server::CqlServer::spawn_on_loopback()
            .await
            .unwrap();
        InProcess {
            addr,
            next: AtomicU64::new(0),
        }
    }
}

#[async_trait]
impl Backend for InProcess {
    async fn fresh(&self) -> Arc<dyn Store> {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        tern_cassandra::open(&format!("cassandra://{}/ks{n}", self.addr))
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_contract() {
    let backend = InProcess::start().await;
    let store = backend.fresh().await;
    let cap = store.capability();
    assert!(!cap.scan_ordered && !cap.update_pushdown && !cap.atomic_batch_with_meta);
    // kassandra has no `toUnixTimestamp(now())` on system.local: the local clock is used.
    assert!(!cap.server_clock);
    if let Err(failures) = tern_testkit::conformance::run_all(store).await {
        panic!("{failures}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writer_loses_no_update() {
    let backend = InProcess::start().await;
    tern_testkit::battery::a_concurrent_writer_loses_no_update_and_every_entity_reaches_the_target(
        &backend,
    )
    .await;
}

/// Writes to one key within a batch apply in order (the store contract), while different keys
/// run in parallel: a put, a delete and a put of one key end with the last put, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_one_key_in_a_batch_apply_in_order() {
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::{Write, WriteOutcome};
    let backend = InProcess::start().await;
    let store = backend.fresh().await;
    let e = |id: i64, n: i64| {
        let mut v = Map::new();
        v.insert("n".to_owned(), Value::Int(n));
        Entity::new(Key::new("k", id).unwrap(), v)
    };
    for round in 0..20 {
        let mut writes = Vec::new();
        for id in 0..10 {
            writes.push(Write::Put(e(id, round)));
            writes.push(Write::Delete(Key::new("k", id).unwrap()));
            writes.push(Write::Insert(e(id, round + 100)));
            writes.push(Write::Replace {
                expected: e(id, round + 100),
                new: e(id, round + 200),
            });
        }
        let outcomes = store.write_batch(writes).await.unwrap();
        assert!(
            outcomes.iter().all(|o| *o == WriteOutcome::Applied),
            "{outcomes:?}"
        );
        for id in 0..10 {
            assert_eq!(
                store.get(&e(id, 0).key).await.unwrap(),
                Some(e(id, round + 200))
            );
        }
    }
}
