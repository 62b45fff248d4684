//! The adapter against the real Cassandra node of `TERN_IT_CASSANDRA_URL`: the store contract
//! (`conformance::run_all`), the concurrent-writer guarantee and the order of writes to one key.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod server;

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_testkit::battery::Backend;

/// A fresh keyspace per store on the server.
#[derive(Debug)]
struct RealNode {
    nodes: String,
}

impl RealNode {
    fn connect(test: &str) -> Option<RealNode> {
        server::nodes(test).map(|nodes| RealNode { nodes })
    }
}

#[async_trait]
impl Backend for RealNode {
    async fn fresh(&self) -> Arc<dyn Store> {
        let ks = server::unique_keyspace("tern_adapter");
        tern_cassandra::open(&format!("cassandra://{}/{ks}", self.nodes))
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_contract() {
    let Some(backend) = RealNode::connect("store_contract") else {
        return;
    };
    let store = backend.fresh().await;
    let features = store.features();
    assert!(
        !features.scan_ordered
            && features.pushdown.is_none()
            && features.atomic_batch_with_meta.is_none()
    );
    // `toUnixTimestamp(now())` on system.local: the lease uses the server's clock.
    assert!(features.server_clock.is_some());
    // The docs' facet table says what the store hands out.
    if let Err(e) =
        tern_testkit::facets::check(include_str!("../src/docs.md"), "Cassandra", &features)
    {
        panic!("{e}");
    }
    if let Err(failures) = tern_testkit::conformance::run_all(store).await {
        panic!("{failures}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writer_loses_no_update() {
    let Some(backend) = RealNode::connect("concurrent_writer_loses_no_update") else {
        return;
    };
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
    let Some(backend) = RealNode::connect("writes_to_one_key_in_a_batch_apply_in_order") else {
        return;
    };
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

/// The partitions of a kind (token ranges of the ring): the test kit's check alone
/// (`store_contract` runs it too, among every other check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_token_ranges_that_cover_the_kind() {
    let Some(backend) = RealNode::connect("partitions_are_token_ranges_that_cover_the_kind") else {
        return;
    };
    let store = backend.fresh().await;
    let parts = store
        .features()
        .partitions
        .expect("the Cassandra store has partitions");
    let split = parts.split("any", 4).await.unwrap();
    assert_eq!(split.len(), 4, "Murmur3 ring in 4: {split:?}");
    tern_testkit::conformance::partitions(store.as_ref())
        .await
        .unwrap_or_else(|f| panic!("{f}"));
}

/// A kind named with a CQL reserved word (`select`, `table`, `order`...) cannot be a table
/// unquoted: writes, reads and scans of it are refused with `Unsupported` naming the kind and
/// the fix, not a raw CQL syntax error from the server; a kind next to it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_named_with_a_reserved_word_is_refused_naming_the_fix() {
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::{ErrorKind, ScanRequest, Write};
    let Some(backend) =
        RealNode::connect("a_kind_named_with_a_reserved_word_is_refused_naming_the_fix")
    else {
        return;
    };
    let store = backend.fresh().await;
    let entity = |kind: &str| {
        Entity::new(
            Key {
                kind: kind.into(),
                id: Value::Int(1),
            },
            Map::new(),
        )
    };
    for kind in ["select", "table", "order"] {
        let refused = |what: &str, e: tern_core::store::Error| {
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{what} of {kind}: {e}");
            let message = e.to_string();
            assert!(
                message.contains(&format!("{kind:?}"))
                    && message.contains("reserved word")
                    && message.contains("rename the kind"),
                "{what} of {kind}: {message}"
            );
        };
        let e = store
            .write_batch(vec![Write::Put(entity(kind))])
            .await
            .unwrap_err();
        refused("a write", e);
        let e = store.get(&entity(kind).key).await.unwrap_err();
        refused("a read", e);
        let e = store
            .scan(kind, ScanRequest::all(None, 10))
            .await
            .unwrap_err();
        refused("a scan", e);
    }
    store
        .write_batch(vec![Write::Put(entity("orders"))])
        .await
        .unwrap();
    assert!(store.get(&entity("orders").key).await.unwrap().is_some());
}
