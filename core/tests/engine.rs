//! The engine battery on the in-memory and the embedded store, and what only
//! the embedded store can show: a crash followed by reopening the file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use tern_core::migrate::{
    FaultAt, FaultHook, FaultPoint, LeaseOptions, Migration, MigrationSet, Migrator, RunOptions,
};
use tern_core::model::json::entity_to_json_line;
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::embedded::EmbeddedStore;
use tern_core::store::memory::MemoryStore;
use tern_core::store::{Filter, ScanRequest, Store, Write};
use tern_core::testing::battery::{Backend, MemoryBackend};

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

const RELEASE2: &str = "add blogpost.likes = 0\nrename blogpost.text to content\n";
const RELEASE3: &str = "copy user.email to blogpost where user.name = blogpost.author\n\
                        move user.url to blogpost where user.name = blogpost.author\n";

fn set(scripts: &[(u32, &str)]) -> MigrationSet {
    let mut s = MigrationSet::new();
    for (id, text) in scripts {
        s.add(
            Migration::from_script(*id, &format!("m{id}"), &format!("{id:04}_m{id}.tern"), text)
                .unwrap(),
        )
        .unwrap();
    }
    s
}

fn migrator(store: Arc<dyn Store>, scripts: &[(u32, &str)], batch: usize) -> Migrator {
    Migrator::new(store, set(scripts))
        .with_run_options(RunOptions {
            batch_size: batch,
            ..RunOptions::default()
        })
        .with_lease_options(LeaseOptions {
            ttl: Duration::from_millis(60),
            wait: None,
            renew: true,
        })
}

fn blog(users: usize, posts: usize) -> Vec<Entity> {
    let mut out = Vec::new();
    for u in 0..users {
        let mut v = Map::new();
        v.insert("name".into(), Value::from(format!("user{u}")));
        v.insert("email".into(), Value::from(format!("u{u}@x.org")));
        if u % 3 != 0 {
            v.insert("url".into(), Value::from(format!("http://u{u}.org")));
        }
        out.push(Entity::new(
            Key::new("user", format!("u{u:04}")).unwrap(),
            v,
        ));
        for p in 0..posts {
            let mut v = Map::new();
            v.insert("text".into(), Value::from("x"));
            v.insert("author".into(), Value::from(format!("user{u}")));
            out.push(Entity::new(
                Key::new("blogpost", format!("p{u:04}-{p}")).unwrap(),
                v,
            ));
        }
    }
    out
}

async fn load(store: &dyn Store, entities: &[Entity]) {
    store
        .write_batch(entities.iter().cloned().map(Write::Put).collect())
        .await
        .unwrap();
}

async fn export(store: &dyn Store) -> String {
    let mut lines = Vec::new();
    for kind in store.kinds().await.unwrap() {
        let mut cursor = None;
        loop {
            let page = store
                .scan(
                    &kind,
                    ScanRequest {
                        filter: Filter::all(),
                        cursor,
                        limit: 100,
                    },
                )
                .await
                .unwrap();
            lines.extend(page.entities.iter().map(entity_to_json_line));
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
    }
    lines.sort();
    lines.join("\n")
}

async fn reference_export(entities: &[Entity], batch: usize) -> String {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    load(store.as_ref(), entities).await;
    migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], batch)
        .up(None)
        .await
        .unwrap();
    export(store.as_ref()).await
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
