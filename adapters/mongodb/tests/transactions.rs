//! Issue 34 item 13: MongoDB's multi-document transactions give the store the
//! `atomic_writes` facet where the deployment has them (a replica set, as the
//! test server advertises itself), so a lazy `rename kind` installs and runs;
//! a standalone server (a SecantusDB of the test's own, `--standalone`, on
//! 127.0.0.1:27102) has none, and the install is refused with that reason.
//!
//! A transaction that another transaction's write aborts (`WriteConflict`,
//! `TransientTransactionError`) is run again inside the adapter, and answers
//! `Conflict` only when a guard no longer holds.
//!
//! The first tests need `TERN_IT_MONGODB_URL`, the last `secantusd-py` (at
//! `$TERN_SECANTUSD`, in the venv of `scripts/servers.sh`, or on the PATH);
//! each prints why and is skipped without it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// The test server's URL, or `None` after printing why the test is skipped.
fn server_url() -> Option<String> {
    let url = std::env::var("TERN_IT_MONGODB_URL").ok();
    if url.is_none() {
        eprintln!(
            "skipped: TERN_IT_MONGODB_URL is not set (scripts/servers.sh start mongodb; \
             eval \"$(scripts/servers.sh env)\")"
        );
    }
    url
}

/// A database of its own on the server at `url`.
async fn fresh(url: &str) -> Arc<dyn Store> {
    fresh_with_url(url).await.0
}

/// [`fresh`], and the store's URL (with its database).
async fn fresh_with_url(url: &str) -> (Arc<dyn Store>, String) {
    let (main, query) = url.split_once('?').unwrap_or((url, ""));
    let (scheme, rest) = main.split_once("://").unwrap_or(("mongodb", main));
    let host = rest.split('/').next().unwrap_or(rest);
    let db = format!("tern_tx_{}", uuid_ish());
    let url = format!("{scheme}://{host}/{db}?{query}");
    let url = url.trim_end_matches('?').to_owned();
    let store = MongoStore::connect(MongoConfig::from_url(&url).unwrap())
        .await
        .unwrap();
    (Arc::new(store), url)
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
    let Some(url) = server_url() else {
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

/// Another client's open transaction that wrote `kind:id` (the document
/// `{_id: id}` of the collection `kind`): every transaction that writes the
/// same document meanwhile aborts with `WriteConflict`.
struct Blocker {
    session: mongodb::ClientSession,
}

impl Blocker {
    async fn start(url: &str, kind: &str, id: i64) -> Blocker {
        let client = mongodb::Client::with_uri_str(url).await.unwrap();
        let db = client.default_database().expect("a database in the URL");
        let mut session = client.start_session().await.unwrap();
        session.start_transaction().await.unwrap();
        db.collection::<mongodb::bson::Document>(kind)
            .update_one(
                mongodb::bson::doc! { "_id": id },
                mongodb::bson::doc! { "$set": { "blocker": 1 } },
            )
            .session(&mut session)
            .await
            .unwrap();
        Blocker { session }
    }

    /// Ends the transaction after `after`: committed (its write applied) or aborted.
    async fn end(mut self, after: Duration, commit: bool) {
        tokio::time::sleep(after).await;
        if commit {
            self.session.commit_transaction().await.unwrap();
        } else {
            self.session.abort_transaction().await.unwrap();
        }
    }
}

/// A transaction aborted by another transaction's write (`WriteConflict`,
/// labelled `TransientTransactionError`) is run again inside the adapter:
/// a put answers `Applied` once the other transaction ends (it answered
/// `Conflict`, nothing written, before), a guarded write is `Conflict` only if
/// its guard no longer holds when it runs again, and a transaction aborted on
/// every run is a temporary `Busy` error, not a `Conflict`.
#[tokio::test]
async fn a_transaction_aborted_by_a_write_conflict_runs_again_in_the_adapter() {
    let Some(url) = server_url() else {
        return;
    };
    let (store, url) = fresh_with_url(&url).await;
    let (one, two) = (entity("b", 1, 1, 1), entity("b", 2, 1, 2));
    store
        .write_batch(vec![Write::Put(one.clone()), Write::Put(two.clone())])
        .await
        .unwrap();
    let pause = Duration::from_millis(60);

    // A put (no guard) that meets the other transaction's write to b:1.
    let mine = entity("b", 1, 1, 10);
    let blocker = Blocker::start(&url, "b", 1).await;
    let started = Instant::now();
    let (out, ()) = tokio::join!(
        store.write_atomic_checked(Vec::new(), vec![Write::Put(mine.clone())]),
        blocker.end(pause, true),
    );
    assert_eq!(
        out.unwrap(),
        WriteOutcome::Applied,
        "run again, not a conflict"
    );
    assert!(
        started.elapsed() >= pause,
        "the put ran before the other commit"
    );
    assert_eq!(store.get(&mine.key).await.unwrap(), Some(mine.clone()));

    // A guard on b:2 that the other transaction touches and then aborts: the
    // guard still holds when the transaction runs again.
    let moved = entity("b", 3, 1, 3);
    let guarded = || {
        store.write_atomic_checked(
            vec![Guard::Unchanged(two.clone())],
            vec![Write::Put(moved.clone())],
        )
    };
    let blocker = Blocker::start(&url, "b", 2).await;
    let (out, ()) = tokio::join!(guarded(), blocker.end(pause, false));
    assert_eq!(out.unwrap(), WriteOutcome::Applied);
    assert_eq!(store.get(&moved.key).await.unwrap(), Some(moved.clone()));

    // The same guard, and the other transaction commits its change of b:2:
    // the guard fails when run again, and that alone is a `Conflict`.
    store.delete(&moved.key).await.unwrap();
    let blocker = Blocker::start(&url, "b", 2).await;
    let (out, ()) = tokio::join!(guarded(), blocker.end(pause, true));
    assert_eq!(out.unwrap(), WriteOutcome::Conflict);
    assert_eq!(store.get(&moved.key).await.unwrap(), None);

    // Aborted on every run (the other transaction stays open until the
    // adapter gives up): an error, temporary, with nothing written.
    let blocker = Blocker::start(&url, "b", 1).await;
    let out = store
        .write_atomic_checked(Vec::new(), vec![Write::Put(entity("b", 1, 1, 11))])
        .await;
    blocker.end(Duration::ZERO, false).await;
    let err = out.unwrap_err();
    assert_eq!(err.kind(), tern_core::store::ErrorKind::Busy, "{err}");
    assert!(err.is_temporary(), "{err}");
    assert_eq!(store.get(&mine.key).await.unwrap(), Some(mine));
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
