//! Issue 34 item 13: MongoDB's multi-document transactions give the store the
//! `atomic_writes` facet where the deployment has them (a replica set, as the
//! test server advertises itself), so a lazy `rename kind` installs and runs;
//! a standalone server (a SecantusDB of the test's own, `--standalone`, on
//! 127.0.0.1:27102) has none, and the install is refused with that reason.
//!
//! The first test needs `TERN_IT_MONGODB_URL`, the second `secantusd-py` (at
//! `$TERN_SECANTUSD`, in the venv of `scripts/servers.sh`, or on the PATH);
//! each prints why and is skipped without it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use tern_core::lazy::LazyClient;
use tern_core::migrate::{Migration, MigrationSet, Migrator};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Guard, Store, StoreExt, Write, WriteOutcome};
use tern_mongodb::{MongoConfig, MongoStore};
use tern_testkit::server::{LocalServer, secantusd};

const STANDALONE_PORT: u16 = 27102;

fn entity(kind: &str, id: i64, version: u64, x: i64) -> Entity {
    let mut value = Map::new();
    value.insert("x".to_owned(), Value::Int(x));
    let mut e = Entity::new(Key::new(kind, Value::Int(id)).unwrap(), value);
    e.version = version;
    e
}

fn lazy_rename() -> MigrationSet {
    let mut set = MigrationSet::new();
    set.add(
        Migration::from_script(
            1,
            "rename",
            "0001_rename.tern",
            "lazy\nrename kind a to b\nadd b.y = 1\n",
        )
        .unwrap(),
    )
    .unwrap();
    set
}

/// A database of its own on the server at `url`.
async fn fresh(url: &str) -> Arc<dyn Store> {
    let (main, query) = url.split_once('?').unwrap_or((url, ""));
    let (scheme, rest) = main.split_once("://").unwrap_or(("mongodb", main));
    let host = rest.split('/').next().unwrap_or(rest);
    let db = format!("tern_tx_{}", uuid_ish());
    let url = format!("{scheme}://{host}/{db}?{query}");
    let store = MongoStore::connect(MongoConfig::from_url(url.trim_end_matches('?')).unwrap())
        .await
        .unwrap();
    Arc::new(store)
}

fn uuid_ish() -> String {
    format!(
        "{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// On a replica set: guarded writes over two collections apply together or
/// not at all, and a lazy `rename kind` installs and moves an entity on read
/// (it was refused on MongoDB before: no atomic multi-key write).
#[tokio::test]
async fn item13_a_lazy_kind_rename_runs_in_a_transaction_on_a_replica_set() {
    let Ok(url) = std::env::var("TERN_IT_MONGODB_URL") else {
        eprintln!(
            "skipped: TERN_IT_MONGODB_URL is not set (scripts/servers.sh start mongodb; \
             eval \"$(scripts/servers.sh env)\")"
        );
        return;
    };
    let store = fresh(&url).await;
    assert!(
        store.features().atomic_writes.is_some(),
        "the test server advertises a replica set: transactions"
    );
    let old = entity("a", 1, 0, 1);
    store
        .write_batch(vec![
            Write::Put(old.clone()),
            Write::Put(entity("b", 2, 1, 2)),
        ])
        .await
        .unwrap();

    // A guard that does not hold (b:2 exists): nothing of the call is written.
    let moved = entity("b", 1, 1, 1);
    let out = store
        .write_atomic_checked(
            vec![Guard::Absent(Key::new("b", Value::Int(2)).unwrap())],
            vec![Write::Put(moved.clone()), Write::Delete(old.key.clone())],
        )
        .await
        .unwrap();
    assert_eq!(out, WriteOutcome::Conflict);
    assert_eq!(store.get(&old.key).await.unwrap(), Some(old.clone()));
    assert_eq!(store.get(&moved.key).await.unwrap(), None);

    // A stale `Unchanged` guard: nothing written either.
    let stale = entity("a", 1, 0, 99);
    let out = store
        .write_atomic_checked(
            vec![Guard::Unchanged(stale), Guard::Absent(moved.key.clone())],
            vec![Write::Put(moved.clone()), Write::Delete(old.key.clone())],
        )
        .await
        .unwrap();
    assert_eq!(out, WriteOutcome::Conflict);
    assert_eq!(store.get(&old.key).await.unwrap(), Some(old.clone()));

    // Guards that hold: both collections change together, the guarded
    // document is left exactly as it was (no `%guard` field).
    let out = store
        .write_atomic_checked(
            vec![
                Guard::Unchanged(old.clone()),
                Guard::Absent(moved.key.clone()),
            ],
            vec![Write::Put(moved.clone()), Write::Delete(old.key.clone())],
        )
        .await
        .unwrap();
    assert_eq!(out, WriteOutcome::Applied);
    assert_eq!(store.get(&old.key).await.unwrap(), None);
    assert_eq!(store.get(&moved.key).await.unwrap(), Some(moved.clone()));

    // The lazy kind rename of the issue: installed, then a read under the new
    // name moves the entity from the old collection.
    let other = fresh(&url).await;
    other
        .write_batch(vec![Write::Put(entity("a", 7, 0, 7))])
        .await
        .unwrap();
    Migrator::new(Arc::clone(&other), lazy_rename())
        .up(None)
        .await
        .unwrap();
    let client = LazyClient::builder(Arc::clone(&other))
        .refresh_every(Duration::ZERO)
        .declare("b", 1)
        .connect()
        .await
        .unwrap();
    let read = client
        .get(&Key::new("b", Value::Int(7)).unwrap())
        .await
        .unwrap()
        .expect("read under the new name");
    assert_eq!(read.value.get("x"), Some(&Value::Int(7)));
    assert_eq!(read.value.get("y"), Some(&Value::Int(1)));
    assert_eq!(
        other
            .get(&Key::new("a", Value::Int(7)).unwrap())
            .await
            .unwrap(),
        None
    );
    assert!(
        other
            .get(&Key::new("b", Value::Int(7)).unwrap())
            .await
            .unwrap()
            .is_some()
    );
}

/// On a standalone server (no transactions) the facet is absent, and a lazy
/// `rename kind` is refused at install naming why and what to do; nothing changes.
#[tokio::test]
async fn item13_a_standalone_server_refuses_a_lazy_kind_rename_with_the_reason() {
    let bin = match secantusd() {
        Ok(bin) => bin,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin);
    cmd.args([
        "--host",
        "127.0.0.1",
        "--port",
        &STANDALONE_PORT.to_string(),
    ])
    .arg("--storage-path")
    .arg(dir.path().join("data"))
    .arg("--standalone");
    let _server =
        LocalServer::start(&mut cmd, STANDALONE_PORT, Duration::from_secs(60)).keeping(dir);
    let url = format!(
        "mongodb://127.0.0.1:{STANDALONE_PORT}/tern_standalone?directConnection=true&serverSelectionTimeoutMS=10000"
    );
    let store: Arc<dyn Store> = Arc::new(
        MongoStore::connect(MongoConfig::from_url(&url).unwrap())
            .await
            .unwrap(),
    );
    assert!(store.features().atomic_writes.is_none());
    let hint = store.features().atomic_writes_hint.expect("the reason");
    assert!(
        hint.contains("standalone") && hint.contains("replica set"),
        "{hint}"
    );
    store
        .write_batch(vec![Write::Put(entity("a", 1, 0, 1))])
        .await
        .unwrap();
    let err = Migrator::new(Arc::clone(&store), lazy_rename())
        .up(None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot be lazy"), "{err}");
    assert!(err.contains(hint), "{err}");
    assert!(
        store
            .get(&Key::new("a", Value::Int(1)).unwrap())
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        tern_core::migrate::state::load(store.as_ref())
            .await
            .unwrap()
            .doc
            .kinds
            .is_empty(),
        "nothing installed"
    );
}
