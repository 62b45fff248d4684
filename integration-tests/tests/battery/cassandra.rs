//! The battery on cassandra, plus Cassandra-specific checks: mapping and round trip, scans
//! resumed from paging-state cursors, put/get/delete, unreachable URLs, and the DDL path.

use tern_core::model::json::entity_to_json_line;
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Cursor, ErrorKind, Filter, ScanRequest, Write, WriteOutcome};
use tern_core::testing::battery::report;
use tern_integration_tests::cassandra::backend;

tern_core::battery_tests!("cassandra", tern_integration_tests::cassandra::backend());

fn entity(kind: &str, id: impl Into<Value>, version: u64, props: &[(&str, Value)]) -> Entity {
    let mut e = Entity::new(
        Key::new(kind, id).unwrap(),
        props
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    );
    e.version = version;
    e
}

/// Every tern value type, nested maps, `$`-keyed maps, a NaN payload and composite ids
/// come back exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_mapping_round_trip() {
    let Ok(backend) = backend().await.map_err(|r| {
        report(
            "cassandra",
            "cassandra_mapping_round_trip",
            &format!("skipped: {r}"),
        )
    }) else {
        return;
    };
    let store = tern_core::testing::battery::Backend::fresh(&backend).await;
    let mut nested = Map::new();
    nested.insert("$date".to_owned(), Value::Int(5));
    nested.insert(
        "deep".to_owned(),
        Value::Array(vec![Value::Null, Value::Bool(true)]),
    );
    let mut tagged = Map::new();
    tagged.insert("$oid".to_owned(), Value::String("abc".to_owned()));
    let entities = vec![
        entity(
            "things",
            "s1",
            3,
            &[
                ("int", Value::Int(i64::MIN)),
                ("float", Value::Float(1.0)),
                ("neg_zero", Value::Float(-0.0)),
                (
                    "nan_payload",
                    Value::Float(f64::from_bits(0x7ff8_0000_0000_0001)),
                ),
                ("bytes", Value::Bytes(vec![0, 255, 1])),
                ("ts", Value::Timestamp(-1)),
                ("text", Value::String("é\u{0}'\"".to_owned())),
                ("map", Value::Map(nested)),
                ("dollar", Value::Map(tagged)),
            ],
        ),
        entity("things", 42_i64, 0, &[]),
        entity(
            "things",
            Value::Array(vec![Value::from("a"), Value::Int(1)]),
            1,
            &[("x", Value::Int(1))],
        ),
        entity("things", Value::Bytes(vec![1, 2]), 0, &[("y", Value::Null)]),
    ];
    let writes = entities.iter().cloned().map(Write::Put).collect();
    assert!(
        store
            .write_batch(writes)
            .await
            .unwrap()
            .iter()
            .all(|o| *o == WriteOutcome::Applied)
    );
    for e in &entities {
        let got = store.get(&e.key).await.unwrap().expect("stored entity");
        assert_eq!(entity_to_json_line(&got), entity_to_json_line(e));
        assert_eq!(&got, e);
    }
    assert_eq!(store.kinds().await.unwrap(), ["things"]);
    assert_eq!(store.count("things", Filter::all()).await.unwrap(), 4);
    report("cassandra", "cassandra_mapping_round_trip", "passed");
}

/// Put, get, conditional insert/replace, delete (also of a missing key and an unknown kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_put_get_delete() {
    let Ok(backend) = backend().await.map_err(|r| {
        report(
            "cassandra",
            "cassandra_put_get_delete",
            &format!("skipped: {r}"),
        )
    }) else {
        return;
    };
    let store = tern_core::testing::battery::Backend::fresh(&backend).await;
    let a = entity("users", "a", 0, &[("name", Value::from("ann"))]);
    assert_eq!(store.get(&a.key).await.unwrap(), None);
    assert_eq!(
        store.get(&Key::new("nowhere", "x").unwrap()).await.unwrap(),
        None
    );
    store.put(a.clone()).await.unwrap();
    assert_eq!(store.get(&a.key).await.unwrap(), Some(a.clone()));
    let mut b = a.clone();
    b.version = 1;
    b.value.insert("age".to_owned(), Value::Int(3));
    let stale = entity("users", "a", 0, &[("name", Value::from("bob"))]);
    let outcomes = store
        .write_batch(vec![
            Write::Insert(a.clone()),
            Write::Replace {
                expected: stale.clone(),
                new: b.clone(),
            },
            Write::Replace {
                expected: a.clone(),
                new: b.clone(),
            },
            Write::Replace {
                expected: a.clone(),
                new: b.clone(),
            },
        ])
        .await
        .unwrap();
    // Writes run concurrently: exactly one of the two identical replaces wins.
    assert_eq!(outcomes[0], WriteOutcome::Conflict);
    assert_eq!(outcomes[1], WriteOutcome::Conflict);
    assert_eq!(
        outcomes[2..]
            .iter()
            .filter(|o| **o == WriteOutcome::Applied)
            .count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(store.get(&a.key).await.unwrap(), Some(b.clone()));
    store.delete(&a.key).await.unwrap();
    store.delete(&a.key).await.unwrap();
    store
        .delete(&Key::new("nowhere", "x").unwrap())
        .await
        .unwrap();
    assert_eq!(store.get(&a.key).await.unwrap(), None);
    assert!(store.kinds().await.unwrap().is_empty());
    let err = store
        .put(entity("Bad-Kind", "x", 0, &[]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    report("cassandra", "cassandra_put_get_delete", "passed");
}

/// A scan in pages of 7 over 100 entities, resumed from each cursor through a *new* store
/// (another session), returns every entity exactly once; a garbled cursor is `InvalidCursor`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_scan_resumes_across_paging_states() {
    let Ok(backend) = backend().await.map_err(|r| {
        report(
            "cassandra",
            "cassandra_scan_resumes_across_paging_states",
            &format!("skipped: {r}"),
        )
    }) else {
        return;
    };
    let url = backend.fresh_url();
    let store = tern_cassandra::open(&url).await.unwrap();
    let writes = (0..100)
        .map(|i| {
            Write::Put(entity(
                "items",
                format!("i{i:03}"),
                u64::from(i % 3 == 0),
                &[("n", Value::Int(i))],
            ))
        })
        .collect();
    store.write_batch(writes).await.unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let mut cursor = None;
    let mut pages = 0;
    loop {
        // Each page through a fresh session: the cursor is plain text that survives the process.
        let store = tern_cassandra::open(&url).await.unwrap();
        let page = store
            .scan(
                "items",
                ScanRequest {
                    filter: Filter::all(),
                    cursor,
                    limit: 7,
                },
            )
            .await
            .unwrap();
        assert!(page.entities.len() <= 7);
        for e in page.entities {
            assert!(seen.insert(e.key.id.clone()), "{} returned twice", e.key);
        }
        pages += 1;
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
        assert!(pages < 100, "the scan does not end");
    }
    assert_eq!(seen.len(), 100);
    assert!(pages >= 15, "{pages} pages of at most 7");
    // Filtered on the client with Filter::matches.
    assert_eq!(
        store.count("items", Filter::at_version(1)).await.unwrap(),
        34
    );
    for bad in ["nonsense", "c1.zz", "c1.00ff00"] {
        let err = store
            .scan(
                "items",
                ScanRequest {
                    filter: Filter::all(),
                    cursor: Some(Cursor(bad.to_owned())),
                    limit: 7,
                },
            )
            .await;
        match err {
            Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidCursor, "{bad}: {e:#}"),
            // A server may accept a short paging state as "start over": never an error then.
            Ok(_) => assert!(bad.starts_with("c1.00"), "{bad} accepted"),
        }
    }
    report(
        "cassandra",
        "cassandra_scan_resumes_across_paging_states",
        "passed",
    );
}

/// An unreachable server: a clear, temporary `Unavailable` error naming the URL, no password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_unreachable_url_names_the_url_without_password() {
    // Port 1 on loopback: nothing listens there.
    let err = tern_cassandra::open("cassandra://app:s3cret@127.0.0.1:1/tern?timeout_ms=2000")
        .await
        .unwrap_err();
    let text = format!("{err:#}");
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{text}");
    assert!(err.is_temporary());
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    let err = tern_cassandra::open("cassandra://app:s3cret@127.0.0.1:1/Bad-Keyspace")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConfigInvalid);
    assert!(!format!("{err:#}").contains("s3cret"));
    report(
        "cassandra",
        "cassandra_unreachable_url_names_the_url_without_password",
        "passed",
    );
}

/// The DDL path (native columns on fixed-schema tables: `ALTER TABLE ... ADD`, drop, rename
/// by add + copy + drop) is not implemented by the adapter yet; tern's own document tables
/// need no DDL beyond `CREATE TABLE`. Reported as skipped with the reason.
#[tokio::test]
async fn cassandra_ddl_on_fixed_schema_tables() {
    report(
        "cassandra",
        "cassandra_ddl_on_fixed_schema_tables",
        "skipped: the native-column (fixed-schema) layout and its ALTER TABLE path are not \
         implemented yet; tern-cql-server (kassandra) cannot run ALTER/DROP/TRUNCATE either, so it \
         would need TERN_IT_CASSANDRA_URL pointing at a real Cassandra/ScyllaDB",
    );
}
