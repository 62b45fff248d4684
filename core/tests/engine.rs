//! The engine battery on the in-memory and the embedded store, and what only
//! the embedded store can show: a crash followed by reopening the file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tern_core::migrate::{FaultAt, FaultHook, FaultPoint};
use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;
use tern_core::testing::battery::{
    Backend, MemoryBackend, RELEASE2, RELEASE3, blog, export, load, migrator, reference_export,
};

mod memory {
    tern_core::battery_tests!("memory", async { Ok::<_, String>(super::MemoryBackend) });
}

/// Fresh embedded stores, each in its own temporary folder.
struct EmbeddedBackend {
    dirs: std::sync::Mutex<Vec<tempfile::TempDir>>,
}

#[async_trait]
impl Backend for EmbeddedBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path().join("tern.redb")).unwrap();
        self.dirs.lock().unwrap().push(dir);
        Arc::new(store)
    }
}

mod embedded {
    tern_core::battery_tests!("embedded", async {
        Ok::<_, String>(super::EmbeddedBackend {
            dirs: Default::default(),
        })
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_and_resume_on_the_embedded_store() {
    let entities = blog(9, 3);
    let expected = reference_export(&entities, 5).await;
    for (i, point) in [
        FaultPoint {
            migration: 1,
            stage: 0,
            phase: 0,
            batch: 2,
            at: FaultAt::BeforeCheckpoint,
        },
        FaultPoint {
            migration: 2,
            stage: 0,
            phase: 0,
            batch: 1,
            at: FaultAt::BeforeCheckpoint,
        },
        FaultPoint {
            migration: 2,
            stage: 1,
            phase: 0,
            batch: 0,
            at: FaultAt::AfterCheckpoint,
        },
        FaultPoint {
            migration: 2,
            stage: 1,
            phase: 1,
            batch: 1,
            at: FaultAt::MidBatch,
        },
    ]
    .into_iter()
    .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("t{i}.redb"));
        {
            let store = EmbeddedStore::open(&path).unwrap();
            load(&store, &entities).await;
        }
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
        let fired = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&fired);
        let hook: FaultHook = Arc::new(move |p| p == point && !f.swap(true, Ordering::SeqCst));
        let first = migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 5)
            .with_fault_hook(hook)
            .up(None)
            .await;
        assert!(fired.load(Ordering::SeqCst), "{point:?} reached");
        assert!(first.is_err());
        drop(store);
        // A new process: reopen the file.
        tokio::time::sleep(Duration::from_millis(80)).await;
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
        migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 5)
            .up(None)
            .await
            .unwrap();
        assert_eq!(
            export(store.as_ref()).await,
            expected,
            "after a crash at {point:?}"
        );
    }
}
