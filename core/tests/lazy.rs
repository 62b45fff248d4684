//! The lazy battery on the memory and embedded stores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;
use tern_testkit::battery::{Backend, MemoryBackend};

mod memory {
    tern_testkit::lazy_battery_tests!("memory", async { Ok::<_, String>(super::MemoryBackend) });
}

/// Fresh embedded stores, each in a file of its own.
struct EmbeddedBackend(tempfile::TempDir);

#[async_trait]
impl Backend for EmbeddedBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        let path = self.0.path().join(format!("{}.redb", uuid::Uuid::new_v4()));
        Arc::new(EmbeddedStore::open(path).unwrap())
    }
}

mod embedded {
    tern_testkit::lazy_battery_tests!("embedded", async {
        Ok::<_, String>(super::EmbeddedBackend(tempfile::tempdir().unwrap()))
    });
}
