//! The battery of the kind rename by copy ([`tern_core::store::rename_copy`]),
//! once for every store that renames kinds that way (MongoDB, Cassandra, a
//! Redis Cluster whose ids are not hash tags): what a crash or a writer between
//! the copy and the delete leaves, and that a collision overwrites nothing.
//! [`rename_copy_tests!`](crate::rename_copy_tests) runs it on a backend.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use tern_core::model::{Entity, Key, Value};
use tern_core::store::rename_copy::AfterCopyHook;
use tern_core::store::{
    ErrorKind, Filter, RenameKindPage, RenameKindRequest, Store, StoreExt, Write, WriteOutcome,
};

use super::{entity, load};
use crate::conformance;
use crate::pages::rename_pass;

/// Hands out stores that rename kinds by copy.
#[async_trait]
pub trait CopyRenameBackend: Send + Sync {
    /// A fresh, empty store of its own, and a second store on the same data
    /// whose kind renames run `hook` after each batch's copy and before its
    /// delete (`with_after_copy_hook`, feature `fault-injection`).
    async fn fresh_with_after_copy_hook(
        &self,
        hook: AfterCopyHook,
    ) -> (Arc<dyn Store>, Arc<dyn Store>);
}

/// A fresh pair of stores ([`CopyRenameBackend`]) with a hook that does nothing.
async fn fresh(backend: &dyn CopyRenameBackend) -> (Arc<dyn Store>, Arc<dyn Store>) {
    backend
        .fresh_with_after_copy_hook(Arc::new(|_| Box::pin(async {})))
        .await
}

fn ent(kind: &str, id: i64, n: i64) -> Entity {
    entity(kind, id, 1, &[("n", Value::Int(n))])
}

async fn entities(store: &dyn Store, kind: &str) -> Vec<Entity> {
    conformance::scan_all(store, kind, &Filter::all(), 50)
        .await
        .unwrap()
        .into_values()
        .collect()
}

fn renamed(mut e: Entity, kind: &str) -> Entity {
    e.key = Key::new(kind, e.key.id.clone()).unwrap();
    e
}

/// A crash after a batch's copy and before its delete (the run dies inside the
/// hook) leaves every entity under the old kind and its copy under the new one;
/// the next run takes the identical copies as its own and completes: no
/// collision, every entity moved with its value and version, and a further pass
/// finds nothing.
pub async fn rename_by_copy_completes_a_move_interrupted_after_the_copy(
    backend: &dyn CopyRenameBackend,
) {
    let copied = Arc::new(tokio::sync::Notify::new());
    let hook: AfterCopyHook = {
        let copied = Arc::clone(&copied);
        Arc::new(move |_| {
            let copied = Arc::clone(&copied);
            Box::pin(async move {
                copied.notify_one();
                // The process dies here: the run is dropped mid-batch.
                std::future::pending::<()>().await;
            })
        })
    };
    let (store, hooked) = backend.fresh_with_after_copy_hook(hook).await;
    let data: Vec<Entity> = (1..=7).map(|i| ent("old", i, i)).collect();
    load(store.as_ref(), &data).await;
    let run = tokio::spawn(async move { rename_pass(hooked.as_ref(), "old", "new", 3).await });
    copied.notified().await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert_eq!(
        entities(store.as_ref(), "old").await,
        data,
        "the crash deleted nothing"
    );
    let copies = entities(store.as_ref(), "new").await;
    assert!(!copies.is_empty(), "the first batch was copied");
    for copy in &copies {
        let source = data.iter().find(|e| e.key.id == copy.key.id).unwrap();
        assert_eq!(copy, &renamed(source.clone(), "new"), "an exact copy");
    }

    let page = rename_pass(store.as_ref(), "old", "new", 3).await.unwrap();
    assert_eq!(page.renamed, 7, "{page:?}");
    assert!(page.collisions.is_empty(), "{page:?}");
    assert!(entities(store.as_ref(), "old").await.is_empty());
    let want: Vec<Entity> = data.iter().map(|e| renamed(e.clone(), "new")).collect();
    assert_eq!(entities(store.as_ref(), "new").await, want, "moved exactly");
    let again = rename_pass(store.as_ref(), "old", "new", 3).await.unwrap();
    assert_eq!((again.renamed, again.collisions.len()), (0, 0));
}

/// An id the new kind already holds with another entity is a collision:
/// reported (again by a second pass), both entities kept as they are, the
/// others moved. `limit: 0` writes nothing.
pub async fn rename_by_copy_reports_a_collision_and_overwrites_nothing(
    backend: &dyn CopyRenameBackend,
) {
    let (store, _) = fresh(backend).await;
    load(
        store.as_ref(),
        &(1..=5).map(|i| ent("old", i, i)).collect::<Vec<_>>(),
    )
    .await;
    let checked = store
        .features()
        .kind_rename
        .expect("a store that renames by copy has the kind_rename facet")
        .rename_kind(RenameKindRequest {
            from: "old".into(),
            to: "new".into(),
            cursor: None,
            limit: 0,
        })
        .await
        .unwrap();
    assert_eq!(checked, RenameKindPage::default());
    assert!(entities(store.as_ref(), "new").await.is_empty());
    assert_eq!(
        entities(store.as_ref(), "old").await.len(),
        5,
        "limit 0 moved nothing"
    );

    let squatter = entity("new", 4, 7, &[("mine", Value::Bool(true))]);
    store.put(squatter.clone()).await.unwrap();
    let page = rename_pass(store.as_ref(), "old", "new", 2).await.unwrap();
    assert_eq!(page.renamed, 4, "{page:?}");
    assert_eq!(page.collisions, vec![Key::new("old", 4).unwrap()]);
    assert_eq!(
        entities(store.as_ref(), "old").await,
        vec![ent("old", 4, 4)]
    );
    let mut want: Vec<Entity> = [1, 2, 3, 5].iter().map(|&i| ent("new", i, i)).collect();
    want.insert(3, squatter);
    assert_eq!(
        entities(store.as_ref(), "new").await,
        want,
        "the new kind's entity untouched"
    );
    let again = rename_pass(store.as_ref(), "old", "new", 10).await.unwrap();
    assert_eq!(again.renamed, 0);
    assert_eq!(again.collisions, vec![Key::new("old", 4).unwrap()]);
}

/// What the writer of [`rename_by_copy_never_loses_an_update_made_between_copy_and_delete`]
/// does in the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// Updates `old:2` and deletes `old:5`, once each, when their batch was copied.
    Once,
    /// Updates `old:7` at every call.
    Always,
}

/// A source updated (or deleted) by another writer between the copy and the
/// delete is not lost: the stale copy is taken back and the move tried again
/// with the entity as it is now (a deleted one is not resurrected). A writer
/// that changes an entity at every attempt makes the call fail with a temporary
/// `Busy`, the entity still under the old kind, no copy left; once it stops,
/// the move completes.
pub async fn rename_by_copy_never_loses_an_update_made_between_copy_and_delete(
    backend: &dyn CopyRenameBackend,
) {
    let writer: Arc<OnceLock<Arc<dyn Store>>> = Arc::new(OnceLock::new());
    let mode = Arc::new(Mutex::new(Writer::Once));
    let calls = Arc::new(AtomicUsize::new(0));
    let done: Arc<Mutex<Vec<i64>>> = Arc::default();
    let mut updated = ent("old", 2, 222);
    updated.version = 2;
    let hook: AfterCopyHook = {
        let (writer, mode, calls, done, updated) = (
            Arc::clone(&writer),
            Arc::clone(&mode),
            Arc::clone(&calls),
            Arc::clone(&done),
            updated.clone(),
        );
        Arc::new(move |keys: Vec<Key>| {
            let store = Arc::clone(writer.get().unwrap());
            let mode = *mode.lock().unwrap();
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let mut writes = Vec::new();
            if mode == Writer::Once {
                let mut done = done.lock().unwrap();
                for (id, write) in [
                    (
                        2,
                        Write::Replace {
                            expected: ent("old", 2, 2),
                            new: updated.clone(),
                        },
                    ),
                    (5, Write::Delete(Key::new("old", 5).unwrap())),
                ] {
                    if keys.contains(&Key::new("old", id).unwrap()) && !done.contains(&id) {
                        done.push(id);
                        writes.push(write);
                    }
                }
            }
            Box::pin(async move {
                if mode == Writer::Always {
                    let n = i64::try_from(n).unwrap();
                    store.put(ent("old", 7, 1000 + n)).await.unwrap();
                } else if !writes.is_empty() {
                    let outcomes = store.write_batch(writes).await.unwrap();
                    assert!(
                        outcomes.iter().all(|o| *o == WriteOutcome::Applied),
                        "{outcomes:?}"
                    );
                }
            })
        })
    };
    let (store, hooked) = backend.fresh_with_after_copy_hook(hook).await;
    assert!(writer.set(Arc::clone(&store)).is_ok());
    load(
        store.as_ref(),
        &(1..=6).map(|i| ent("old", i, i)).collect::<Vec<_>>(),
    )
    .await;
    let page = rename_pass(hooked.as_ref(), "old", "new", 10)
        .await
        .unwrap();
    assert_eq!(done.lock().unwrap().len(), 2, "the writer acted");
    assert!(
        calls.load(Ordering::SeqCst) >= 2,
        "the changed entity was tried again"
    );
    assert_eq!(page.renamed, 5, "{page:?}");
    assert!(page.collisions.is_empty(), "{page:?}");
    assert!(entities(store.as_ref(), "old").await.is_empty());
    let want = vec![
        ent("new", 1, 1),
        renamed(updated, "new"),
        ent("new", 3, 3),
        ent("new", 4, 4),
        ent("new", 6, 6),
    ];
    assert_eq!(
        entities(store.as_ref(), "new").await,
        want,
        "the update kept, the delete kept"
    );

    // A writer that changes id 7 at every attempt.
    store.put(ent("old", 7, 7)).await.unwrap();
    *mode.lock().unwrap() = Writer::Always;
    let before = calls.load(Ordering::SeqCst);
    let err = rename_pass(hooked.as_ref(), "old", "new", 10)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    assert!(err.is_temporary(), "{err}");
    assert!(err.to_string().contains("nothing was lost"), "{err}");
    let last = i64::try_from(calls.load(Ordering::SeqCst) - 1).unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst) - before,
        tern_core::store::rename_copy::ATTEMPTS,
        "one change per attempt"
    );
    assert_eq!(
        entities(store.as_ref(), "old").await,
        vec![ent("old", 7, 1000 + last)],
        "the last update is under the old kind"
    );
    assert_eq!(
        entities(store.as_ref(), "new").await.len(),
        5,
        "no copy of it left behind"
    );
    // Once the writer stops, the move completes.
    let page = rename_pass(store.as_ref(), "old", "new", 10).await.unwrap();
    assert_eq!(page.renamed, 1);
    assert_eq!(
        store.get(&Key::new("new", 7).unwrap()).await.unwrap(),
        Some(ent("new", 7, 1000 + last))
    );
}
