#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use super::*;
use crate::model::keycode::encode_key;
use crate::model::{Map, Value};
use crate::store::StoreExt;
use crate::store::{Condition, Cursor, Filter, MetaChange, PushStep, Write};
use tern_testkit::child::{Child, next_seed};

fn temp_store() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open(dir.path().join("tern.redb")).unwrap();
    (dir, store)
}

/// The kind of the error a scan of `kind` fails with.
async fn scan_error(store: &EmbeddedStore, kind: &str, request: ScanRequest) -> ErrorKind {
    store.scan(kind, request).await.unwrap_err().kind()
}

fn entity(kind: &str, id: impl Into<Value>, version: u64, props: &[(&str, Value)]) -> Entity {
    Entity {
        key: Key::new(kind, id).unwrap(),
        version,
        value: props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

#[test]
fn public_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<EmbeddedStore>();
}

#[tokio::test]
async fn info_and_debug_name_the_path() {
    let (dir, store) = temp_store();
    let path = dir.path().join("tern.redb");
    assert_eq!(store.info().scheme, "embedded");
    assert_eq!(
        store.info().location,
        format!("embedded:{}", path.display())
    );
    assert!(format!("{store:?}").contains(&path.display().to_string()));
    assert_eq!(store.path(), path);
}

#[tokio::test]
async fn data_survives_reopen() {
    let (dir, store) = temp_store();
    let path = store.path().to_path_buf();
    let e = entity(
        "user",
        "ann",
        4,
        &[("nan", Value::Float(f64::NAN)), ("z", Value::Float(-0.0))],
    );
    store.put(e.clone()).await.unwrap();
    store
        .meta_cas("ledger", MetaChange::create(r#"{"a":1}"#))
        .await
        .unwrap();
    drop(store);
    let store = EmbeddedStore::open(&path).unwrap();
    assert_eq!(store.get(&e.key).await.unwrap(), Some(e));
    assert_eq!(
        store.meta_get("ledger").await.unwrap(),
        Some(MetaEntry {
            value: r#"{"a":1}"#.into(),
            revision: 1
        })
    );
    assert_eq!(store.kinds().await.unwrap(), vec!["user".to_owned()]);
    drop(dir);
}

#[test]
fn second_open_fails_naming_the_path() {
    let (_dir, store) = temp_store();
    let err = EmbeddedStore::open(store.path()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy);
    // Named once, by the store context of the error.
    let path = store.path().display().to_string();
    assert_eq!(err.to_string().matches(path.as_str()).count(), 1, "{err}");
    assert!(err.message().contains("in use by another process"), "{err}");
}

#[test]
fn unopenable_paths_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing_dir = dir.path().join("no/such/dir/tern.redb");
    let err = EmbeddedStore::open(&missing_dir).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable);
    let path = missing_dir.display().to_string();
    assert_eq!(err.to_string().matches(path.as_str()).count(), 1, "{err}");

    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, vec![0x42u8; 8192]).unwrap();
    let err = EmbeddedStore::open(&garbage).unwrap_err();
    let path = garbage.display().to_string();
    assert_eq!(err.to_string().matches(path.as_str()).count(), 1, "{err}");
}

#[test]
fn works_without_a_tokio_runtime() {
    let (_dir, store) = temp_store();
    let e = entity("k", 1, 0, &[]);
    futures::executor::block_on(store.put(e.clone())).unwrap();
    assert_eq!(
        futures::executor::block_on(store.get(&e.key)).unwrap(),
        Some(e)
    );
}

#[tokio::test]
async fn a_projected_scan_decodes_the_named_properties_and_those_the_filter_tests() {
    let (_dir, store) = temp_store();
    let big = Value::from("x".repeat(1000));
    let entities: Vec<_> = (0..6)
        .map(|i| {
            entity(
                "k",
                i,
                0,
                &[
                    ("a", Value::Int(i)),
                    ("b", Value::Int(i % 2)),
                    ("text", big.clone()),
                ],
            )
        })
        .collect();
    store
        .write_batch(entities.iter().cloned().map(Write::Put).collect())
        .await
        .unwrap();
    let request = ScanRequest {
        filter: Filter {
            version: crate::store::VersionFilter::Any,
            conditions: vec![Condition {
                path: vec!["b".into()],
                values: vec![Value::Int(1)],
            }],
        },
        cursor: None,
        limit: 100,
    };
    let page = store
        .features()
        .projected_scan
        .unwrap()
        .scan_projected("k", request.clone(), &["a".to_owned()])
        .await
        .unwrap();
    let whole = store.scan("k", request).await.unwrap();
    assert_eq!(page.entities.len(), 3);
    assert_eq!(page.cursor, whole.cursor);
    for (projected, full) in page.entities.iter().zip(&whole.entities) {
        assert_eq!(projected.key, full.key);
        assert_eq!(projected.version, full.version);
        let names: Vec<&String> = projected.value.keys().collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(projected.value.get("a"), full.value.get("a"));
    }
}

#[test]
fn url_options_set_the_cache() {
    let (path, options) = EmbeddedOptions::split_url("data/t.redb").unwrap();
    assert_eq!((path, options), ("data/t.redb", EmbeddedOptions::default()));
    let (path, options) = EmbeddedOptions::split_url("t.redb?cache_mb=256").unwrap();
    assert_eq!(path, "t.redb");
    assert_eq!(options.cache_bytes, 256 << 20);
    for bad in ["t.redb?cache_mb=0", "t.redb?cache_mb=x", "t.redb?cache=1"] {
        let err = EmbeddedOptions::split_url(bad).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConfigInvalid, "{bad}");
    }
    let dir = tempfile::tempdir().unwrap();
    let store = EmbeddedStore::open_with(
        dir.path().join("small.redb"),
        EmbeddedOptions {
            cache_bytes: 1 << 20,
        },
    )
    .unwrap();
    futures::executor::block_on(store.put(entity("k", 1, 0, &[]))).unwrap();
}

#[tokio::test]
async fn pages_respect_the_limit_and_end_without_an_empty_page() {
    let (_dir, store) = temp_store();
    let entities: Vec<_> = (0..10).map(|i| entity("k", i, 0, &[])).collect();
    store
        .write_batch(entities.into_iter().map(Write::Put).collect())
        .await
        .unwrap();
    let mut cursor = None;
    let mut pages = Vec::new();
    loop {
        let page = store.scan("k", ScanRequest::all(cursor, 5)).await.unwrap();
        pages.push(page.entities.len());
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(pages, vec![5, 5]);
}

#[tokio::test]
async fn a_selective_filter_returns_short_pages_instead_of_reading_everything() {
    let (_dir, store) = temp_store();
    let entities: Vec<_> = (0..3000)
        .map(|i| entity("k", i, u64::from(i == 2999), &[]))
        .collect();
    store
        .write_batch(entities.into_iter().map(Write::Put).collect())
        .await
        .unwrap();
    let first = store
        .scan(
            "k",
            ScanRequest {
                filter: Filter::at_version(1),
                cursor: None,
                limit: 1,
            },
        )
        .await
        .unwrap();
    assert!(first.entities.is_empty());
    assert!(first.cursor.is_some());
    assert_eq!(store.count("k", Filter::at_version(1)).await.unwrap(), 1);
}

#[tokio::test]
async fn foreign_cursors_are_invalid() {
    let (_dir, store) = temp_store();
    store.put(entity("a", 1, 0, &[])).await.unwrap();
    store.put(entity("a", 2, 0, &[])).await.unwrap();
    let page = store.scan("a", ScanRequest::all(None, 1)).await.unwrap();
    let cursor = page.cursor.unwrap();
    assert_eq!(
        scan_error(&store, "b", ScanRequest::all(Some(cursor), 1)).await,
        ErrorKind::InvalidCursor
    );
    assert_eq!(
        scan_error(
            &store,
            "a",
            ScanRequest::all(Some(Cursor("not hex".into())), 1)
        )
        .await,
        ErrorKind::InvalidCursor
    );
}

#[tokio::test]
async fn kinds_lists_each_kind_once_whatever_its_name() {
    let (_dir, store) = temp_store();
    let names = ["a", "a\0", "a\0b", "ab", "b", "é", "user"];
    let mut writes = Vec::new();
    for kind in names {
        for id in 0..50 {
            writes.push(Write::Put(Entity {
                key: Key {
                    kind: kind.into(),
                    id: Value::Int(id),
                },
                version: 0,
                value: Map::new(),
            }));
        }
    }
    store.write_batch(writes).await.unwrap();
    let mut want: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    want.sort();
    assert_eq!(store.kinds().await.unwrap(), want);
    for kind in names {
        assert_eq!(
            store.count(kind, Filter::all()).await.unwrap(),
            50,
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn a_replace_that_changes_the_key_is_refused() {
    let (_dir, store) = temp_store();
    let a = entity("k", 1, 0, &[]);
    let b = entity("k", 2, 0, &[]);
    store.put(a.clone()).await.unwrap();
    // Checked once for every store, by the call the engine makes.
    let err = store
        .write_checked(vec![Write::Replace {
            expected: a.clone(),
            new: b,
        }])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unexpected);
    assert_eq!(store.get(&a.key).await.unwrap(), Some(a));
}

#[tokio::test]
async fn too_deep_values_are_rejected_and_nothing_of_the_batch_is_written() {
    let (_dir, store) = temp_store();
    let mut deep = Value::Null;
    for _ in 0..300 {
        deep = Value::Array(vec![deep]);
    }
    let ok = entity("k", 1, 0, &[]);
    let bad = entity("k", 2, 0, &[("d", deep)]);
    let err = store
        .write_batch(vec![Write::Put(ok.clone()), Write::Put(bad)])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert!(err.to_string().contains("k:2"), "{err}");
    assert_eq!(store.get(&ok.key).await.unwrap(), None);

    // A replace whose `expected` is too deep cannot match anything stored.
    store.put(ok.clone()).await.unwrap();
    let outcomes = store
        .write_batch(vec![Write::Replace {
            expected: bad_value(&ok),
            new: ok.clone(),
        }])
        .await
        .unwrap();
    assert_eq!(outcomes, vec![WriteOutcome::Conflict]);
}

fn bad_value(like: &Entity) -> Entity {
    let mut deep = Value::Null;
    for _ in 0..300 {
        deep = Value::Array(vec![deep]);
    }
    let mut e = like.clone();
    e.value.insert("d".into(), deep);
    e
}

#[tokio::test]
async fn corrupt_entities_are_invalid_data_naming_the_key() {
    let (_dir, store) = temp_store();
    let key = Key::new("user", "ann").unwrap();
    {
        let txn = store
            .inner
            .db
            .writable("test")
            .unwrap()
            .begin_write()
            .unwrap();
        {
            let mut table = txn.open_table(ENTITIES).unwrap();
            table
                .insert(encode_key(&key).as_slice(), [1u8, 0, 42].as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
    }
    let err = store.get(&key).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert!(
        err.context()
            .iter()
            .any(|(k, v)| *k == "key" && *v == hex::encode(encode_key(&key))),
        "{err}"
    );
    assert!(
        err.context()
            .iter()
            .any(|(k, v)| *k == "kind" && v == "user"),
        "{err}"
    );
    assert_eq!(
        scan_error(&store, "user", ScanRequest::all(None, 10)).await,
        ErrorKind::InvalidData
    );
}

#[tokio::test]
async fn update_in_place_batches_are_limited_and_skip_other_versions_cheaply() {
    let (_dir, store) = temp_store();
    let writes = (0..10)
        .map(|i| Write::Put(entity("k", i, if i < 5 { 0 } else { 1 }, &[])))
        .collect();
    store.write_batch(writes).await.unwrap();
    let step = PushStep {
        conditions: vec![Condition::eq("missing", 1)],
        op: crate::store::PushOp::Set {
            path: vec!["x".into()],
            value: Value::Int(1),
        },
    };
    let request = |cursor| PushdownRequest {
        kind: "k".into(),
        from: 1,
        steps: vec![step.clone()],
        cursor,
        limit: 4,
    };
    let p1 = store.update_in_place(request(None)).await.unwrap();
    assert_eq!((p1.advanced, p1.changed.clone()), (0, vec![0]));
    let p2 = store.update_in_place(request(p1.cursor)).await.unwrap();
    assert_eq!((p2.advanced, p2.changed.clone()), (3, vec![0]));
    let p3 = store.update_in_place(request(p2.cursor)).await.unwrap();
    assert_eq!((p3.advanced, p3.cursor), (2, None));
    assert_eq!(
        store.version_census("k").await.unwrap(),
        [(0, 5), (2, 5)].into_iter().collect()
    );
}

// ---- crash safety ----

const CRASH_CHILD_ENV: &str = "TERN_EMBEDDED_CRASH_CHILD";
const CRASH_BATCH: i64 = 200;
const CRASH_DELETE_LAG: i64 = 3;

fn crash_data_key(batch: i64, j: i64) -> Key {
    Key::new("data", Value::Array(vec![Value::Int(batch), Value::Int(j)])).unwrap()
}

/// The writes of batch `b`: its data, its marker, the counter, and the deletion
/// of the odd data of batch `b - CRASH_DELETE_LAG`. All or nothing must survive.
fn crash_batch(b: i64) -> Vec<Write> {
    let mut writes = Vec::new();
    for j in 0..CRASH_BATCH {
        let e = Entity {
            key: crash_data_key(b, j),
            version: b as u64,
            value: [
                ("b".to_owned(), Value::Int(b)),
                (
                    "pad".to_owned(),
                    Value::String("x".repeat(100 + j as usize)),
                ),
            ]
            .into_iter()
            .collect(),
        };
        writes.push(Write::Put(e));
    }
    if b >= CRASH_DELETE_LAG {
        for j in (1..CRASH_BATCH).step_by(2) {
            writes.push(Write::Delete(crash_data_key(b - CRASH_DELETE_LAG, j)));
        }
    }
    writes.push(Write::Put(entity("marker", b, 0, &[])));
    writes.push(Write::Put(entity(
        "counter",
        "last",
        0,
        &[("b", Value::Int(b))],
    )));
    writes
}

/// Run by [`crash_safety`] in a child process: writes batches until killed.
#[test]
#[ignore = "helper: run by crash_safety as a child process"]
fn crash_child() {
    let Some((path, rt)) = tern_testkit::child::child_work(CRASH_CHILD_ENV) else {
        return;
    };
    rt.block_on(async {
        let store = EmbeddedStore::open(&path).unwrap();
        let next = match store
            .get(&Key::new("counter", "last").unwrap())
            .await
            .unwrap()
        {
            Some(e) => match e.value.get("b") {
                Some(Value::Int(b)) => b + 1,
                _ => panic!("bad counter"),
            },
            None => 0,
        };
        for b in next.. {
            store.write_batch(crash_batch(b)).await.unwrap();
            println!("committed {b}");
        }
    });
}

/// Checks the invariants after a crash; returns the last batch present.
async fn check_after_crash(store: &EmbeddedStore, committed: Option<i64>) -> Option<i64> {
    let markers = store.version_census("marker").await.unwrap();
    let n_markers = markers.values().sum::<u64>() as i64;
    let last = store
        .get(&Key::new("counter", "last").unwrap())
        .await
        .unwrap()
        .map(|e| match e.value.get("b") {
            Some(Value::Int(b)) => *b,
            other => panic!("bad counter {other:?}"),
        });
    // Markers are exactly 0..=last: every batch entirely present or absent.
    assert_eq!(n_markers, last.map_or(0, |l| l + 1), "markers vs counter");
    let mut cursor = None;
    let mut marker_ids = Vec::new();
    loop {
        let page = store
            .scan("marker", ScanRequest::all(cursor, 1000))
            .await
            .unwrap();
        marker_ids.extend(page.entities.into_iter().map(|e| e.key.id));
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(
        marker_ids,
        (0..n_markers).map(Value::Int).collect::<Vec<_>>()
    );
    // Every batch the child reported committed is durable.
    if let Some(c) = committed {
        assert!(
            last.is_some_and(|l| l >= c),
            "batch {c} was committed but is gone (last {last:?})"
        );
    }
    // The data: even entities of every batch; odd ones only for the last CRASH_DELETE_LAG batches.
    let last_b = last.unwrap_or(-1);
    let mut want = 0u64;
    for b in 0..=last_b {
        want += if b + CRASH_DELETE_LAG > last_b {
            CRASH_BATCH as u64
        } else {
            CRASH_BATCH as u64 / 2
        };
    }
    assert_eq!(
        store.count("data", Filter::all()).await.unwrap(),
        want,
        "data entities"
    );
    for b in 0..=last_b {
        let e = store.get(&crash_data_key(b, 0)).await.unwrap().unwrap();
        assert_eq!(e.value.get("b"), Some(&Value::Int(b)));
        let odd_present = store.get(&crash_data_key(b, 1)).await.unwrap().is_some();
        assert_eq!(
            odd_present,
            b + CRASH_DELETE_LAG > last_b,
            "odd data of batch {b}, last {last_b}"
        );
    }
    assert_eq!(
        store.get(&crash_data_key(last_b + 1, 0)).await.unwrap(),
        None,
        "data of a batch without marker"
    );
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_safety() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.redb");
    let mut seed = uuid::Uuid::new_v4().as_u128();
    let mut last = None;
    let committed_batch = |line: &str| -> Option<i64> {
        line.strip_prefix("committed ")
            .map(|b| b.trim().parse().unwrap())
    };
    for round in 0..6 {
        let child = Child::spawn(
            "store::embedded::tests::crash_child",
            CRASH_CHILD_ENV,
            &path,
        );
        // Wait for the first commit of this round, then kill at a random moment.
        let first = loop {
            if let Some(b) = committed_batch(&child.next_line(Duration::from_secs(60))) {
                break b;
            }
        };
        let delay = Duration::from_micros((seed % 150_000) as u64);
        seed = next_seed(seed);
        let started = Instant::now();
        while started.elapsed() < delay {
            std::thread::sleep(Duration::from_millis(1));
        }
        let committed = child
            .kill()
            .iter()
            .rev()
            .find_map(|l| committed_batch(l))
            .unwrap_or(first);
        let store = EmbeddedStore::open(&path).unwrap();
        let now = check_after_crash(&store, Some(committed)).await;
        eprintln!(
            "crash round {round}: killed after {delay:?}, last committed {committed}, last present {now:?}"
        );
        assert!(now >= last, "batches went missing");
        last = now;
    }
    let mut db = redb::Database::open(&path).unwrap();
    assert!(
        db.check_integrity().unwrap(),
        "the file needed a repair after a clean close"
    );
}

/// Issue 34 item 1: a file killed while open (an unclean shutdown) is repaired
/// by redb when it is opened again; tern notices, checks every page against
/// its checksum before using it, and says so ([`EmbeddedStore::was_repaired`]),
/// while a cleanly closed file is opened as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unclean_shutdown_is_repaired_then_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.redb");
    let child = Child::spawn(
        "store::embedded::tests::crash_child",
        CRASH_CHILD_ENV,
        &path,
    );
    let committed = loop {
        if let Some(b) = child
            .next_line(Duration::from_secs(60))
            .strip_prefix("committed ")
        {
            break b.trim().parse::<i64>().unwrap();
        }
    };
    drop(child.kill());
    let store = EmbeddedStore::open(&path).unwrap();
    assert!(
        store.was_repaired(),
        "a file killed while open was opened without a repair"
    );
    check_after_crash(&store, Some(committed)).await;
    drop(store);
    let store = EmbeddedStore::open(&path).unwrap();
    assert!(
        !store.was_repaired(),
        "a cleanly closed file was reported repaired"
    );
}
