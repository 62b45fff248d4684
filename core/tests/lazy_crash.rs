//! Lazy migration across process deaths on the embedded store: the file
//! reopened between install and first access, SIGKILL during an install and
//! during a sweep.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tern_core::lazy::{self, LazyClient, SweepOptions};
use tern_core::migrate::{LeaseOptions, Migrator, state};
use tern_core::model::{Entity, Key, Value};
use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;
use tern_testkit::child::{Child, next_seed};
use tern_testkit::lazy::{raw_kind, set};

const CHILD_ENV: &str = "TERN_LAZY_KILL_CHILD";
const SCRIPT: &str = "lazy\nadd item.tag = 1\nrename item.a to b\n";
const N: i64 = 3000;

fn lease() -> LeaseOptions {
    LeaseOptions {
        ttl: Duration::from_millis(200),
        wait: Some(Duration::from_secs(20)),
        renew: true,
    }
}

async fn load(store: &dyn Store) {
    let writes = (0..N)
        .map(|i| {
            let mut value = tern_core::model::Map::new();
            value.insert("a".into(), Value::Int(i));
            tern_core::store::Write::Put(Entity {
                key: Key::new("item", i).unwrap(),
                version: 0,
                value,
            })
        })
        .collect();
    store.write_batch(writes).await.unwrap();
}

async fn install(store: Arc<dyn Store>) {
    Migrator::new(store, set(&[(1, SCRIPT)]))
        .with_lease_options(lease())
        .up(None)
        .await
        .unwrap();
}

async fn sweep(store: Arc<dyn Store>, batch_size: usize) -> lazy::SweepReport {
    lazy::sweep::sweep(
        store,
        &lease(),
        &BTreeMap::new(),
        &SweepOptions {
            batch_size,
            ..SweepOptions::default()
        },
    )
    .await
    .unwrap()
}

fn expected(i: i64) -> tern_core::model::Map {
    [
        ("b".to_owned(), Value::Int(i)),
        ("tag".to_owned(), Value::Int(1)),
    ]
    .into_iter()
    .collect()
}

/// Every entity is either untouched at v0 or fully migrated at v2; with `all`, all at v2.
async fn check(store: &dyn Store, all: bool) {
    let items = raw_kind(store, "item").await;
    assert_eq!(items.len() as i64, N);
    for e in items {
        let Value::Int(i) = e.key.id else { panic!() };
        match e.version {
            2 => assert_eq!(e.value, expected(i)),
            0 if !all => assert_eq!(e.value.get("a"), Some(&Value::Int(i))),
            _ => panic!("{e:?}"),
        }
    }
}

/// The child: installs or sweeps, as told, on the file named by the variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the kill tests as a child process"]
async fn lazy_kill_child() {
    let Ok(arg) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (what, path) = arg.split_once(':').unwrap();
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(path).unwrap());
    println!("start");
    match what {
        "install" => install(store).await,
        _ => {
            sweep(store, 25).await;
        }
    }
    println!("done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_file_reopened_between_install_and_first_access() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reopen.redb");
    {
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
        load(store.as_ref()).await;
        install(store).await;
    }
    let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
    // Still stale on disk: never stamped current untransformed.
    check(store.as_ref(), false).await;
    assert_eq!(
        store
            .get(&Key::new("item", 7).unwrap())
            .await
            .unwrap()
            .unwrap()
            .version,
        0
    );
    let client = LazyClient::builder(Arc::clone(&store))
        .declare("item", 2)
        .connect()
        .await
        .unwrap();
    let got = client
        .get(&Key::new("item", 7).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((got.version, got.value), (2, expected(7)));
    check(store.as_ref(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_install_leaves_the_old_or_the_new_version() {
    let mut seed = uuid::Uuid::new_v4().as_u128();
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("install.redb");
        load(&EmbeddedStore::open(&path).unwrap()).await;
        let child = Child::spawn(
            "lazy_kill_child",
            CHILD_ENV,
            format!("install:{}", path.display()),
        );
        while !child.next_line(Duration::from_secs(60)).ends_with("start") {}
        let pause = Duration::from_micros((seed % 20_000) as u64);
        seed = next_seed(seed);
        std::thread::sleep(pause);
        let done = child.kill().iter().any(|l| l.ends_with("done"));
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
        let doc = state::load(store.as_ref()).await.unwrap().doc;
        let installed = doc.kinds.get("item") == Some(&2);
        assert!(
            installed || doc.kinds.is_empty(),
            "round {round}: {:?}",
            doc.kinds
        );
        assert_eq!(installed, !doc.lazy.is_empty() && doc.applied.len() == 1);
        eprintln!(
            "install kill round {round}: after {pause:?}, installed: {installed} (finished: {done})"
        );
        check(store.as_ref(), false).await;
        install(Arc::clone(&store)).await;
        let doc = state::load(store.as_ref()).await.unwrap().doc;
        assert_eq!((doc.kinds.get("item"), doc.applied.len()), (Some(&2), 1));
        sweep(store.clone(), 500).await;
        check(store.as_ref(), true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_a_sweep_resumes_and_loses_nothing() {
    let mut seed = uuid::Uuid::new_v4().as_u128();
    let mut killed = 0;
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep.redb");
        {
            let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
            load(store.as_ref()).await;
            install(store).await;
        }
        let child = Child::spawn(
            "lazy_kill_child",
            CHILD_ENV,
            format!("sweep:{}", path.display()),
        );
        while !child.next_line(Duration::from_secs(60)).ends_with("start") {}
        let pause = Duration::from_millis(20 + (seed % 300) as u64);
        seed = next_seed(seed);
        std::thread::sleep(pause);
        let done = child.kill().iter().any(|l| l.ends_with("done"));
        let store: Arc<dyn Store> = Arc::new(EmbeddedStore::open(&path).unwrap());
        check(store.as_ref(), false).await;
        let doc = state::load(store.as_ref()).await.unwrap().doc;
        if !done {
            killed += 1;
        }
        eprintln!(
            "sweep kill round {round}: after {pause:?} (finished: {done}), checkpoint {:?}",
            doc.sweep.as_ref().map(|s| s.migrated)
        );
        let report = sweep(Arc::clone(&store), 500).await;
        assert_eq!(report.remaining(), 0);
        check(store.as_ref(), true).await;
        let doc = state::load(store.as_ref()).await.unwrap().doc;
        assert!(doc.lazy[0].completed_at.is_some() && doc.sweep.is_none());
    }
    assert!(killed >= 2, "only {killed} of 4 sweeps were killed mid-way");
}
