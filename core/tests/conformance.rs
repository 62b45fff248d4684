//! The store conformance battery (tern-testkit) against the memory and the
//! embedded store.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use tern_core::store::memory::MemoryStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_conformance() {
    if let Err(failures) = tern_testkit::conformance::run_all(Arc::new(MemoryStore::new())).await {
        panic!("{failures}");
    }
}

#[cfg(feature = "embedded")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let store =
        tern_core::store::embedded::EmbeddedStore::open(dir.path().join("tern.redb")).unwrap();
    if let Err(failures) = tern_testkit::conformance::run_all(Arc::new(store)).await {
        panic!("{failures}");
    }
}
