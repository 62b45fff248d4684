//! Issue 34 item 5, "an export is not a backup": on every store, an export of
//! a migrated store (its first line tern's state) imports into a new store as
//! the same store, and a state never lands in a store it does not describe.

use std::sync::Arc;

use tern_core::backup::{
    self, BackupError, ExportOptions, ImportLine, ImportOptions, Importer, RestoredState,
};
use tern_core::lazy;
use tern_core::migrate::Migrator;
use tern_core::store::{Store, Write};

use super::{Backend, RELEASE2, blog, entity, load, set};

/// A lazy migration left pending: its entities stay below the kind's version.
const LAZY_ADD: &str = "lazy\nadd user.active = true\n";

/// `tern export` of `store` as text, through the library call the CLI makes
/// (a small sort budget, so an unordered store's kinds go through temporary files).
pub async fn export_text(store: &dyn Store) -> String {
    let mut kinds = store.kinds().await.unwrap();
    kinds.sort();
    let mut out = Vec::new();
    let options = ExportOptions {
        sort_memory: 2048,
        ..ExportOptions::default()
    };
    backup::export(store, &kinds, &mut out, &options)
        .await
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// `tern import` of `text` into `store` (as the CLI does, line by line, in
/// batches of 50): the number of entities written.
pub async fn import_text(
    store: &dyn Store,
    text: &str,
    options: ImportOptions,
) -> Result<u64, BackupError> {
    let mut importer = Importer::new(store, options).await?;
    let mut batch = Vec::new();
    let mut written = 0u64;
    for (i, line) in text.lines().enumerate() {
        if let ImportLine::Entity(e) = importer.line(store, line.as_bytes(), i as u64 + 1).await? {
            batch.push(Write::Put(e));
        }
        if batch.len() >= 50 {
            written += batch.len() as u64;
            store.write_batch(std::mem::take(&mut batch)).await.unwrap();
        }
    }
    written += batch.len() as u64;
    if !batch.is_empty() {
        store.write_batch(batch).await.unwrap();
    }
    Ok(written)
}

/// A store migrated by release 2 (eagerly) and a pending lazy migration.
async fn migrated(backend: &dyn Backend) -> Arc<dyn Store> {
    let store = backend.fresh().await;
    load(store.as_ref(), &blog(12, 3)).await;
    Migrator::new(Arc::clone(&store), set(&[(1, RELEASE2), (2, LAZY_ADD)]))
        .up(None)
        .await
        .unwrap();
    store
}

/// Export → import into a new store → export gives the same text; the new
/// store has the old one's kind versions, ledger and pending lazy migration:
/// `tern up` of the same migrations finds nothing to do, the lazy status
/// counts the same stale entities. Without the state line (an export of
/// earlier versions) the same file is refused at its first migrated entity:
/// the reported bug.
pub async fn an_export_is_a_backup_export_import_export_is_identical_in_a_new_store(
    backend: &dyn Backend,
) {
    let a = migrated(backend).await;
    let first = export_text(a.as_ref()).await;
    assert!(
        first.starts_with("{\"tern_state\":"),
        "the export starts with tern's state: {}",
        first.lines().next().unwrap_or_default()
    );
    let b = backend.fresh().await;
    let written = import_text(b.as_ref(), &first, ImportOptions::default())
        .await
        .unwrap();
    assert_eq!(written as usize, first.lines().count() - 1);
    let second = export_text(b.as_ref()).await;
    assert_eq!(second, first, "export -> import into a new store -> export");

    let stale = |s: Vec<lazy::KindLazyStatus>| {
        s.into_iter()
            .map(|k| (k.kind, k.version, k.pending, k.stale))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        stale(lazy::status(b.as_ref(), true).await.unwrap()),
        stale(lazy::status(a.as_ref(), true).await.unwrap())
    );
    let again = Migrator::new(Arc::clone(&b), set(&[(1, RELEASE2), (2, LAZY_ADD)]))
        .up(None)
        .await
        .unwrap();
    assert!(
        again.applied.is_empty(),
        "nothing pending on the restored store"
    );

    // The same entities without the state: refused as before (version 2 is
    // above kind blogpost's version 0), nothing written.
    let c = backend.fresh().await;
    let err = import_text(c.as_ref(), &first, ImportOptions { ignore_state: true })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("is above kind"), "{err}");
}

/// A file's state goes only into an empty store or one that already has it:
/// a store holding entities and no state, or another state, refuses it with
/// the reason (and `--no-state`); importing the same file again into the
/// restored store is accepted (an interrupted import run again).
pub async fn importing_tern_state_into_a_non_empty_store_is_refused_unless_it_matches(
    backend: &dyn Backend,
) {
    let a = migrated(backend).await;
    let file = export_text(a.as_ref()).await;

    let with_entities = backend.fresh().await;
    load(
        with_entities.as_ref(),
        &[entity("user", "z", 0, &[("name", "z".into())])],
    )
    .await;
    let err = import_text(with_entities.as_ref(), &file, ImportOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, BackupError::StateRefused(_)), "{err:?}");
    assert!(err.to_string().contains("already holds entities"), "{err}");
    assert!(err.to_string().contains("--no-state"), "{err}");
    assert_eq!(
        with_entities.kinds().await.unwrap(),
        vec!["user".to_owned()]
    );

    let other = backend.fresh().await;
    load(other.as_ref(), &blog(2, 1)).await;
    Migrator::new(Arc::clone(&other), set(&[(1, RELEASE2)]))
        .up(None)
        .await
        .unwrap();
    let before = export_text(other.as_ref()).await;
    let err = import_text(other.as_ref(), &file, ImportOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("has another"), "{err}");
    assert!(err.to_string().contains("applied migrations [1]"), "{err}");
    assert_eq!(export_text(other.as_ref()).await, before, "nothing written");

    let restored = backend.fresh().await;
    import_text(restored.as_ref(), &file, ImportOptions::default())
        .await
        .unwrap();
    let mut importer = Importer::new(restored.as_ref(), ImportOptions::default())
        .await
        .unwrap();
    let first = file.lines().next().unwrap();
    assert_eq!(
        importer
            .line(restored.as_ref(), first.as_bytes(), 1)
            .await
            .unwrap(),
        ImportLine::State(RestoredState::Matched)
    );
    import_text(restored.as_ref(), &file, ImportOptions::default())
        .await
        .unwrap();
    assert_eq!(export_text(restored.as_ref()).await, file);
}
