//! The adapter against an in-process tern-cql-server on an ephemeral loopback port: the store
//! contract (`conformance::run_all`) and the concurrent-writer guarantee, with no setup.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use tern_core::store::Store;
use tern_core::testing::battery::Backend;

/// A server of its own and a fresh keyspace per store.
#[derive(Debug)]
struct InProcess {
    addr: std::net::SocketAddr,
    next: AtomicU64,
}

impl InProcess {
    async fn start() -> InProcess {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(tern_cql_server::CqlServer::new().serve(listener));
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
    assert!(cap.cas_compares_value && !cap.scan_ordered && !cap.update_pushdown);
    // kassandra has no `toUnixTimestamp(now())` on system.local: the local clock is used.
    assert!(!cap.server_clock);
    if let Err(failures) = tern_core::store::conformance::run_all(store).await {
        panic!("{failures}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writer_loses_no_update() {
    let backend = InProcess::start().await;
    tern_core::testing::battery::a_concurrent_writer_loses_no_update_and_every_entity_reaches_the_target(&backend).await;
}
