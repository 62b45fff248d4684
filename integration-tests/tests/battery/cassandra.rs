//! The battery on cassandra, plus Cassandra-specific checks: mapping and round trip, scans
//! resumed from paging-state cursors, put/get/delete, unreachable URLs, the native layout
//! (fixed-schema tables) and its DDL, and the token-range fallback of refused cursors.
//!
//! All of it runs against the real Apache Cassandra node of `TERN_IT_CASSANDRA_URL`
//! (`scripts/servers.sh start cassandra`): `ALTER`/`DROP`, `token()` paging and conditions on
//! partitions of several rows included.

use std::collections::BTreeMap;
use std::sync::Arc;
use tern_core::model::json::entity_to_json_line;
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Cursor, ErrorKind, Filter, ScanRequest, Write, WriteOutcome};

use tern_core::store::StoreExt;
use tern_integration_tests::cassandra::{CassBackend, backend};
use tern_testkit::battery::{self, entity, or_skip, report};
use tern_testkit::pages::{put_numbered, scan_pages, scan_pages_from};

tern_testkit::battery_tests!("cassandra", tern_integration_tests::cassandra::backend());
tern_testkit::rename_copy_tests!("cassandra", tern_integration_tests::cassandra::backend());

mod app_rows;
mod renames;

/// Every tern value type, nested maps, `$`-keyed maps, a NaN payload and composite ids
/// come back exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_mapping_round_trip() {
    let test = "cassandra_mapping_round_trip";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let store = tern_testkit::battery::Backend::fresh(&backend).await;
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
    report("cassandra", test, "passed");
}

/// Put, get, conditional insert/replace, delete (also of a missing key and an unknown kind).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_put_get_delete() {
    let test = "cassandra_put_get_delete";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let store = tern_testkit::battery::Backend::fresh(&backend).await;
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
    report("cassandra", test, "passed");
}

/// A scan in pages of 7 over 100 entities, resumed from each cursor through a *new* store
/// (another session), returns every entity exactly once; a garbled cursor is `InvalidCursor`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_scan_resumes_across_paging_states() {
    let test = "cassandra_scan_resumes_across_paging_states";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let url = backend.fresh_url();
    let store = tern_cassandra::open(&url).await.unwrap();
    put_numbered(store.as_ref(), "items", 100, |i| format!("i{i:03}")).await;
    // Each page through a fresh session: the cursor is plain text that survives the process.
    let open = || async { tern_cassandra::open(&url).await.unwrap() };
    let pages = scan_pages(open, "items", &Filter::all(), 7, 100).await;
    assert_eq!(pages.ids_once().len(), 100);
    assert!(pages.count() >= 15, "{} pages of at most 7", pages.count());
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
    report("cassandra", test, "passed");
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

/// The blog's tables of the native layout, with every column the battery's migrations write.
const USER_FULL: &str = "user (id text PRIMARY KEY, tern_version bigint, name text, email text, \
     url text)";
const BLOGPOST_FULL: &str = "blogpost (id text PRIMARY KEY, tern_version bigint, title text, \
     text text, author text, likes bigint, content text, email text, url text)";

/// The backend, or `None` after reporting the skip of `test` (no server).
async fn backend_with(test: &str) -> Option<CassBackend> {
    or_skip(backend(), Some(("cassandra", test))).await
}

/// The columns of a table and their types, from `system_schema.columns`.
async fn columns(backend: &CassBackend, ks: &str, table: &str) -> BTreeMap<String, String> {
    let session = backend.session().await.unwrap();
    let result = session
        .query_unpaged(
            "SELECT column_name, type FROM system_schema.columns \
             WHERE keyspace_name = ? AND table_name = ?",
            (ks, table),
        )
        .await
        .unwrap();
    let rows = result.into_rows_result().unwrap();
    rows.rows::<(String, String)>()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The blog migrations on native tables created up front with all their columns (no DDL
/// needed): the result equals the reference store's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_native_layout_migrates_the_blog() {
    let test = "cassandra_native_layout_migrates_the_blog";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (_, _, store) = backend
        .native_store(
            &[USER_FULL, BLOGPOST_FULL],
            "native=user,blogpost&drop_columns=false",
        )
        .await
        .unwrap();
    let scripts = [(1, battery::RELEASE2), (2, battery::RELEASE3)];
    battery::migrates_like_the_memory_store(store, &battery::blog(8, 3), &scripts, 5).await;
    report("cassandra", test, "passed");
}

/// The language's DDL on fixed-schema tables that lack the new columns: `add` and `rename`
/// add typed columns (`ALTER TABLE ... ADD`), the version column is added, `delete`, `rename`
/// and `move` drop the columns they emptied after the census, a conditional delete keeps its
/// column, nested literals get a collection or a JSON text column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_ddl_on_fixed_schema_tables() {
    let test = "cassandra_ddl_on_fixed_schema_tables";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (ks, url, store) = backend
        .native_store(
            &[
                "user (id text PRIMARY KEY, name text, email text, url text)",
                "blogpost (id text PRIMARY KEY, title text, text text, author text)",
            ],
            "native=user,blogpost",
        )
        .await
        .unwrap();
    let data = battery::blog(6, 2);
    // Version 0 needs no version column: the application's rows are loaded as they are.
    battery::load(store.as_ref(), &data).await;
    let release4 = "add blogpost.meta = {\"a\": 1, \"b\": \"x\"}\n\
                    add blogpost.tags = [\"a\", \"b\"]\n\
                    delete blogpost.likes where blogpost.author = \"user1\"\n";
    let scripts = [
        (1, battery::RELEASE2),
        (2, battery::RELEASE3),
        (3, release4),
    ];
    let report_up = battery::migrator(Arc::clone(&store), &scripts, 4)
        .up(None)
        .await
        .unwrap();
    assert_eq!(report_up.applied.len(), 3);
    assert_eq!(
        battery::export(store.as_ref()).await,
        battery::memory_export(&data, &scripts, 4).await
    );
    let blogpost = columns(&backend, &ks, "blogpost").await;
    let expected: BTreeMap<String, String> = [
        ("id", "text"),
        ("title", "text"),
        ("author", "text"),
        ("tern_version", "bigint"),
        ("likes", "bigint"),
        ("content", "text"),
        ("email", "text"),
        ("url", "text"),
        ("meta", "text"),
        ("tags", "list<text>"),
    ]
    .into_iter()
    .map(|(c, t)| (c.to_owned(), t.to_owned()))
    .collect();
    assert_eq!(blogpost, expected, "`text` is dropped after the rename");
    let user = columns(&backend, &ks, "user").await;
    assert!(
        !user.contains_key("url"),
        "the moved url is dropped: {user:?}"
    );
    assert_eq!(user.get("tern_version").map(String::as_str), Some("bigint"));
    // The JSON column reads back as a map; a second store (a fresh schema cache) too.
    let store2 = tern_cassandra::open(&url).await.unwrap();
    let post = store2
        .get(&Key::new("blogpost", "p0002-0").unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut meta = Map::new();
    meta.insert("a".into(), Value::Int(1));
    meta.insert("b".into(), Value::from("x"));
    assert_eq!(post.get("meta"), Some(&Value::Map(meta)));
    assert_eq!(
        post.get("tags"),
        Some(&Value::Array(vec![Value::from("a"), Value::from("b")]))
    );
    report("cassandra", test, "passed");
}

/// A cursor whose paging state the cluster refuses continues as a token-range scan from the
/// token of the last row read: the scan still returns every entity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_refused_paging_state_falls_back_to_token_ranges() {
    let test = "cassandra_refused_paging_state_falls_back_to_token_ranges";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (_, _, store) = backend
        .native_store(
            &["nat (a text, b bigint, n bigint, tern_version bigint, PRIMARY KEY ((a, b)))"],
            "native=nat",
        )
        .await
        .unwrap();
    let mut writes = Vec::new();
    for i in 0..60_i64 {
        writes.push(Write::Put(entity(
            "docs",
            format!("d{i}"),
            0,
            &[("n", Value::Int(i))],
        )));
        writes.push(Write::Put(entity(
            "nat",
            Value::Array(vec![Value::from("k"), Value::Int(i)]),
            0,
            &[("n", Value::Int(i))],
        )));
    }
    store.write_batch(writes).await.unwrap();
    for kind in ["docs", "nat"] {
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = None;
        for _ in 0..2 {
            let page = store
                .scan(
                    kind,
                    ScanRequest {
                        filter: Filter::all(),
                        cursor,
                        limit: 7,
                    },
                )
                .await
                .unwrap();
            seen.extend(page.entities.into_iter().map(|e| e.key.id));
            cursor = page.cursor;
        }
        // Garble the paging state, keep the token: `c2.<from>.<last>.<paging state>`.
        let text = cursor.unwrap().0;
        let (head, _) = text.rsplit_once('.').unwrap();
        assert!(
            !head.ends_with(".-"),
            "the cursor holds the last token: {text}"
        );
        let garbled = Some(Cursor(format!("{head}.00ff00ff")));
        let open = || async { Arc::clone(&store) };
        let rest = scan_pages_from(open, kind, &Filter::all(), 7, usize::MAX, garbled).await;
        seen.extend(rest.entities.into_iter().map(|e| e.key.id));
        assert_eq!(seen.len(), 60, "{kind}");
    }
    report("cassandra", test, "passed");
}

/// Compare-and-set on a native table whose partitions hold several rows (clustering columns).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_native_cas_on_clustered_partitions() {
    let test = "cassandra_native_cas_on_clustered_partitions";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (_, _, store) = backend
        .native_store(
            &[
                "events (device text, seq bigint, v text, tern_version bigint, \
               PRIMARY KEY (device, seq))",
            ],
            "native=events",
        )
        .await
        .unwrap();
    let id = |seq: i64| Value::Array(vec![Value::from("d"), Value::Int(seq)]);
    let rows: Vec<Entity> = (0..3)
        .map(|i| entity("events", id(i), 0, &[("v", Value::from("x"))]))
        .collect();
    battery::load(store.as_ref(), &rows).await;
    let mut new = rows[1].clone();
    new.version = 1;
    let stale = entity("events", id(1), 0, &[("v", Value::from("y"))]);
    let outcomes = store
        .write_batch(vec![
            Write::Replace {
                expected: stale,
                new: new.clone(),
            },
            Write::Replace {
                expected: rows[1].clone(),
                new: new.clone(),
            },
        ])
        .await
        .unwrap();
    assert_eq!(outcomes, [WriteOutcome::Conflict, WriteOutcome::Applied]);
    assert_eq!(store.get(&new.key).await.unwrap(), Some(new));
    assert_eq!(
        store.get(&rows[2].key).await.unwrap(),
        Some(rows[2].clone())
    );
    report("cassandra", test, "passed");
}
