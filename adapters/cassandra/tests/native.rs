//! The native layout (fixed-schema tables created up front with all their columns) against the
//! real Cassandra node of `TERN_IT_CASSANDRA_URL`: mapping of every column type, composite ids,
//! put/get/delete, compare-and-set over every column, scans resumed across sessions and from a
//! refused paging state, and the engine battery's blog migrations. The DDL of the language runs
//! in tern-integration-tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod server;

use std::sync::Arc;

use async_trait::async_trait;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use tern_core::model::{Key, Map, Value};
use tern_core::store::StoreExt;
use tern_core::store::{Cursor, ErrorKind, Filter, ScanRequest, Store, Write, WriteOutcome};
use tern_testkit::battery::{self, Backend, entity};
use tern_testkit::pages::{put_numbered, scan_pages};

struct Server {
    nodes: String,
    session: Session,
}

impl Server {
    /// The server, or `None` after printing why `test` is skipped.
    async fn connect(test: &str) -> Option<Server> {
        let nodes = server::nodes(test)?;
        let session = SessionBuilder::new()
            .known_nodes(nodes.split(','))
            .build()
            .await
            .unwrap();
        Some(Server { nodes, session })
    }

    async fn cql(&self, cql: &str) {
        self.session
            .query_unpaged(cql, &[])
            .await
            .unwrap_or_else(|e| panic!("{cql}: {e}"));
    }

    /// A fresh keyspace holding `tables` (CREATE TABLE bodies after `ks.`), and its store URL.
    async fn keyspace(&self, tables: &[&str], options: &str) -> (String, String) {
        let ks = server::unique_keyspace("tern_native");
        self.cql(&format!(
            "CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ))
        .await;
        for t in tables {
            self.cql(&format!("CREATE TABLE {ks}.{t}")).await;
        }
        (
            ks.clone(),
            format!("cassandra://{}/{ks}?{options}", self.nodes),
        )
    }
}

const USERS: &str = "users (id text PRIMARY KEY, tern_version bigint, name text, age bigint, \
     small int, score double, ratio float, active boolean, born timestamp, photo blob, \
     tags list<text>, labels set<text>, attrs map<text, bigint>, meta text)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_columns_round_trip_and_compare_and_set_compares_every_column() {
    let Some(server) =
        Server::connect("native_columns_round_trip_and_compare_and_set_compares_every_column")
            .await
    else {
        return;
    };
    let (ks, url) = server.keyspace(&[USERS], "native=users").await;
    let store = tern_cassandra::open(&url).await.unwrap();
    // `meta` holds any value as JSON text: registered like tern registers the JSON columns it adds.
    server
        .cql(&format!(
            "INSERT INTO {ks}.tern_json_columns (name) VALUES ('users.meta')"
        ))
        .await;
    let mut attrs = Map::new();
    attrs.insert("x".into(), Value::Int(-1));
    let mut nested = Map::new();
    nested.insert("$date".into(), Value::Int(5));
    nested.insert(
        "deep".into(),
        Value::Array(vec![Value::Null, Value::Bytes(vec![1])]),
    );
    let ann = entity(
        "users",
        "ann",
        3,
        &[
            ("name", Value::from("Ann é'\"")),
            ("age", Value::Int(i64::MIN)),
            ("small", Value::Int(-7)),
            ("score", Value::Float(f64::from_bits(0x7ff8_0000_0000_0001))),
            ("ratio", Value::Float(0.5)),
            ("active", Value::Bool(true)),
            ("born", Value::Timestamp(-1)),
            ("photo", Value::Bytes(vec![0, 255])),
            (
                "tags",
                Value::Array(vec![Value::from("b"), Value::from("a"), Value::from("b")]),
            ),
            (
                "labels",
                Value::Array(vec![Value::from("x"), Value::from("y")]),
            ),
            ("attrs", Value::Map(attrs)),
            ("meta", Value::Map(nested)),
        ],
    );
    store.put(ann.clone()).await.unwrap();
    let got = store.get(&ann.key).await.unwrap().unwrap();
    assert_eq!(got, ann);
    assert_eq!(store.kinds().await.unwrap(), ["users"]);

    // Columns are readable in CQL: the version is a plain bigint, the JSON column is text.
    let (version, meta) = server
        .session
        .query_unpaged(
            format!("SELECT tern_version, meta FROM {ks}.users WHERE id = 'ann'"),
            &[],
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .first_row::<(Option<i64>, Option<String>)>()
        .unwrap();
    assert_eq!(version, Some(3));
    let meta = meta.unwrap();
    assert!(
        meta.contains(r#""deep":[null,{"$bytes":"AQ=="}]"#),
        "{meta}"
    );

    // A row the application wrote itself (no version) is an entity at version 0.
    server
        .cql(&format!(
            "INSERT INTO {ks}.users (id, name) VALUES ('bob', 'Bob')"
        ))
        .await;
    let bob = store
        .get(&Key::new("users", "bob").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        bob,
        entity("users", "bob", 0, &[("name", Value::from("Bob"))])
    );

    // Compare-and-set: a stale version, a stale value (changed behind tern's back, version
    // unchanged), then the right one; two replaces of one key in one batch run in order.
    let mut bob1 = bob.clone();
    bob1.version = 1;
    bob1.value.insert("age".into(), Value::Int(30));
    server
        .cql(&format!(
            "UPDATE {ks}.users SET name = 'Robert' WHERE id = 'bob'"
        ))
        .await;
    let outcomes = store
        .write_batch(vec![
            Write::Replace {
                expected: bob.clone(),
                new: bob1.clone(),
            },
            Write::Insert(bob.clone()),
        ])
        .await
        .unwrap();
    assert_eq!(outcomes, [WriteOutcome::Conflict, WriteOutcome::Conflict]);
    let current = store.get(&bob.key).await.unwrap().unwrap();
    assert_eq!(current.get("name"), Some(&Value::from("Robert")));
    let mut bob2 = current.clone();
    bob2.version = 1;
    bob2.value.insert("age".into(), Value::Int(31));
    let outcomes = store
        .write_batch(vec![
            Write::Replace {
                expected: current.clone(),
                new: bob2.clone(),
            },
            Write::Replace {
                expected: current.clone(),
                new: bob2.clone(),
            },
        ])
        .await
        .unwrap();
    assert_eq!(outcomes, [WriteOutcome::Applied, WriteOutcome::Conflict]);
    assert_eq!(store.get(&bob.key).await.unwrap(), Some(bob2.clone()));

    // Back to version 0: an empty version cell, so that version-0 rows look alike.
    let mut bob0 = bob2.clone();
    bob0.version = 0;
    assert_eq!(
        store
            .write_batch(vec![Write::Replace {
                expected: bob2.clone(),
                new: bob0.clone()
            }])
            .await
            .unwrap(),
        [WriteOutcome::Applied]
    );
    let (version,) = server
        .session
        .query_unpaged(
            format!("SELECT tern_version FROM {ks}.users WHERE id = 'bob'"),
            &[],
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .first_row::<(Option<i64>,)>()
        .unwrap();
    assert_eq!(version, None);

    // null is an empty cell: it reads back absent.
    let mut nulls = entity(
        "users",
        "cy",
        1,
        &[("name", Value::Null), ("age", Value::Int(1))],
    );
    store.put(nulls.clone()).await.unwrap();
    nulls.value.remove("name");
    assert_eq!(store.get(&nulls.key).await.unwrap(), Some(nulls));

    // A fixed schema: a property without a column, a value its column cannot hold.
    let err = store
        .put(entity("users", "dan", 0, &[("likes", Value::Int(1))]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert!(
        err.to_string().contains("no column for property likes"),
        "{err}"
    );
    assert!(err.to_string().contains("ALTER TABLE"), "{err}");
    let err = store
        .put(entity("users", "dan", 0, &[("age", Value::from("old"))]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("property age: a string cannot be stored in a bigint column"),
        "{err}"
    );
    let err = store.put(entity("users", 5_i64, 0, &[])).await.unwrap_err();
    assert!(err.to_string().contains("key column id"), "{err}");

    // Delete, also of a missing key; a native table that does not exist is refused for writes.
    store.delete(&ann.key).await.unwrap();
    store.delete(&ann.key).await.unwrap();
    assert_eq!(store.get(&ann.key).await.unwrap(), None);
    assert_eq!(store.count("users", Filter::all()).await.unwrap(), 2);
    let store2 = tern_cassandra::open(&url.replace("native=users", "native=users,nowhere"))
        .await
        .unwrap();
    let err = store2
        .put(entity("nowhere", "x", 0, &[]))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Rejected);
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert_eq!(
        store2
            .get(&Key::new("nowhere", "x").unwrap())
            .await
            .unwrap(),
        None
    );
    // Kinds not named native still get document tables next to the native ones.
    store2
        .put(entity("docs", "d", 0, &[("any", Value::Int(1))]))
        .await
        .unwrap();
    assert_eq!(store2.kinds().await.unwrap(), ["docs", "users"]);
}

/// A column of every type the native layout maps, collections frozen and nested.
const TYPES: &str = "types (id text PRIMARY KEY, tern_version bigint, a ascii, v varchar, \
     b boolean, big bigint, i int, s smallint, t tinyint, d double, f float, bl blob, \
     ts timestamp, u uuid, tu timeuuid, ip inet, l list<frozen<list<bigint>>>, st set<text>, \
     m map<text, int>, fs frozen<set<bigint>>, fm frozen<map<text, frozen<list<double>>>>)";

/// `column type` of every column of `ks.table`, as `system_schema.columns` spells them.
async fn schema_types(server: &Server, ks: &str, table: &str) -> Vec<(String, String)> {
    let mut types: Vec<(String, String)> = server
        .session
        .query_unpaged(
            "SELECT column_name, type FROM system_schema.columns \
             WHERE keyspace_name = ? AND table_name = ?",
            (ks, table),
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows::<(String, String)>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    types.sort();
    types
}

/// Column types come from the server (the driver's types of a prepared `SELECT`'s result,
/// frozen as `system_schema.columns` says): a value of every mapped type round-trips, a kind
/// rename creates the new table with exactly the old one's types (frozen collections, nested
/// ones too), and a table with a type tern does not map is refused naming column and type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_types_come_from_the_server_and_unmapped_ones_are_refused_by_name() {
    let test = "column_types_come_from_the_server_and_unmapped_ones_are_refused_by_name";
    let Some(server) = Server::connect(test).await else {
        return;
    };
    let (ks, url) = server
        .keyspace(
            &[
                TYPES,
                "money (id text PRIMARY KEY, price decimal)",
                "lookup (id text PRIMARY KEY, names map<int, text>)",
            ],
            "native=types,renamed,money,lookup",
        )
        .await;
    let store = tern_cassandra::open(&url).await.unwrap();
    let ints = |items: &[i64]| Value::Array(items.iter().map(|i| Value::Int(*i)).collect());
    let mut m = Map::new();
    m.insert("k".into(), Value::Int(-3));
    let mut fm = Map::new();
    fm.insert(
        "w".into(),
        Value::Array(vec![Value::Float(0.5), Value::Float(-0.0)]),
    );
    let row = entity(
        "types",
        "a",
        1,
        &[
            ("a", Value::from("abc")),
            ("v", Value::from("vé")),
            ("b", Value::Bool(false)),
            ("big", Value::Int(i64::MAX)),
            ("i", Value::Int(-2_147_483_648)),
            ("s", Value::Int(32767)),
            ("t", Value::Int(-128)),
            ("d", Value::Float(1e300)),
            ("f", Value::Float(0.25)),
            ("bl", Value::Bytes(vec![0, 255])),
            ("ts", Value::Timestamp(-1)),
            ("u", Value::from("123e4567-e89b-12d3-a456-426614174000")),
            ("tu", Value::from("50554d6e-29bb-11e5-b345-feff819cdc9f")),
            ("ip", Value::from("::1")),
            ("l", Value::Array(vec![ints(&[2, 1]), ints(&[])])),
            ("st", Value::Array(vec![Value::from("x"), Value::from("y")])),
            ("m", Value::Map(m)),
            ("fs", ints(&[1, 5])),
            ("fm", Value::Map(fm)),
        ],
    );
    store.put(row.clone()).await.unwrap();
    assert_eq!(store.get(&row.key).await.unwrap(), Some(row.clone()));
    // Values a column would change are refused by its type.
    let err = store
        .put(entity("types", "b", 1, &[("t", Value::Int(128))]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("a tinyint column"), "{err}");

    battery::migrator(
        Arc::clone(&store),
        &[(1, "rename kind types to renamed")],
        2,
    )
    .up(None)
    .await
    .unwrap();
    let created = schema_types(&server, &ks, "renamed").await;
    assert_eq!(created, schema_types(&server, &ks, "types").await);
    assert!(
        created.contains(&(
            "fm".to_owned(),
            "frozen<map<text, frozen<list<double>>>>".to_owned()
        )),
        "{created:?}"
    );
    let moved = store.get(&Key::new("renamed", "a").unwrap()).await;
    assert_eq!(moved.unwrap().map(|e| e.value), Some(row.value));

    for (kind, says) in [
        ("money", "column price: CQL type decimal is not supported"),
        (
            "lookup",
            "column names: CQL type map<int, text> is not supported",
        ),
    ] {
        let err = store.get(&Key::new(kind, "x").unwrap()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn composite_ids_map_to_partition_and_clustering_columns() {
    let Some(server) =
        Server::connect("composite_ids_map_to_partition_and_clustering_columns").await
    else {
        return;
    };
    let (_, url) = server
        .keyspace(
            &[
                "events (device text, day bigint, seq bigint, v double, tern_version bigint, \
               PRIMARY KEY ((device, day), seq))",
            ],
            "native=*",
        )
        .await;
    let store = tern_cassandra::open(&url).await.unwrap();
    let id = |d: &str, day: i64, seq: i64| {
        Value::Array(vec![Value::from(d), Value::Int(day), Value::Int(seq)])
    };
    let mut writes = Vec::new();
    for seq in 0..5 {
        writes.push(Write::Put(entity(
            "events",
            id("a", 1, seq),
            0,
            &[("v", Value::Float(0.5))],
        )));
    }
    writes.push(Write::Put(entity("events", id("b", 2, 0), 0, &[])));
    store.write_batch(writes).await.unwrap();
    assert_eq!(store.kinds().await.unwrap(), ["events"]);
    assert_eq!(store.count("events", Filter::all()).await.unwrap(), 6);
    let got = store
        .get(&Key::new("events", id("a", 1, 3)).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.value.get("v"), Some(&Value::Float(0.5)));
    // Compare-and-set on a row of a partition of several rows.
    let b = store
        .get(&Key::new("events", id("b", 2, 0)).unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut b1 = b.clone();
    b1.version = 1;
    assert_eq!(
        store
            .write_batch(vec![Write::Replace {
                expected: b,
                new: b1.clone()
            }])
            .await
            .unwrap(),
        [WriteOutcome::Applied]
    );
    assert_eq!(store.get(&b1.key).await.unwrap(), Some(b1));
    store
        .delete(&Key::new("events", id("a", 1, 0)).unwrap())
        .await
        .unwrap();
    assert_eq!(store.count("events", Filter::all()).await.unwrap(), 5);
    let err = store
        .put(entity("events", "flat", 0, &[]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("array of 3 values (device, day, seq)"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_scans_resume_across_sessions_and_refused_cursors_restart_here() {
    let Some(server) =
        Server::connect("native_scans_resume_across_sessions_and_refused_cursors_restart_here")
            .await
    else {
        return;
    };
    let (_, url) = server
        .keyspace(
            &["items (id bigint PRIMARY KEY, n bigint, tern_version bigint)"],
            "native=items",
        )
        .await;
    let store = tern_cassandra::open(&url).await.unwrap();
    put_numbered(store.as_ref(), "items", 100, |i| i).await;
    // Each page through a new session.
    let open = || async { tern_cassandra::open(&url).await.unwrap() };
    let pages = scan_pages(open, "items", &Filter::all(), 7, 100).await;
    for c in &pages.cursors {
        // `c2.<from>.<last>.<paging state>`: the last row's token is known, so a refused
        // paging state can continue from it on a real cluster.
        let parts: Vec<&str> = c.0.split('.').collect();
        assert_eq!((parts[0], parts[1]), ("c2", "-"), "{c:?}");
        assert!(parts[2].parse::<i64>().is_ok(), "{c:?}");
    }
    assert_eq!(pages.ids_once().len(), 100);
    assert_eq!(
        store.count("items", Filter::at_version(1)).await.unwrap(),
        34
    );
    // A cursor whose paging state the server refuses continues as a token-range scan from
    // the last row's token (42 here).
    let concrete =
        tern_cassandra::CassStore::connect(tern_cassandra::CassConfig::from_url(&url).unwrap())
            .await
            .unwrap();
    assert!(concrete.token_ranges());
    let page = store
        .scan(
            "items",
            ScanRequest {
                filter: Filter::all(),
                cursor: Some(Cursor("c2.-.42.ffffffff".into())),
                limit: 7,
            },
        )
        .await
        .unwrap();
    assert!(!page.entities.is_empty() && page.entities.len() <= 7);
    let bad = store
        .scan(
            "items",
            ScanRequest {
                filter: Filter::all(),
                cursor: Some(Cursor("c2.-.x.ffffffff".into())),
                limit: 7,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidCursor, "{bad:#}");
}

/// Stores over the blog's two tables, created up front with every column the battery's
/// migrations write (no DDL is needed), emptied columns kept.
struct NativeBlog(Arc<Server>);

#[async_trait]
impl Backend for NativeBlog {
    async fn fresh(&self) -> Arc<dyn Store> {
        let (_, url) = self
            .0
            .keyspace(
                &[
                    "user (id text PRIMARY KEY, tern_version bigint, name text, email text, \
                     url text, active boolean)",
                    "blogpost (id text PRIMARY KEY, tern_version bigint, title text, text text, \
                     author text, likes bigint, content text, email text, url text)",
                ],
                "native=user,blogpost&drop_columns=false",
            )
            .await;
        tern_cassandra::open(&url).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_battery_runs_on_native_tables() {
    let Some(server) = Server::connect("the_engine_battery_runs_on_native_tables").await else {
        return;
    };
    let backend = NativeBlog(Arc::new(server));
    // Every battery test whose data fits the two tables (text ids, the blog's properties).
    battery::crash_at_every_batch_boundary_and_mid_batch_resumes_exactly(&backend).await;
    battery::late_entities_written_during_the_run_are_swept_by_the_census(&backend).await;
    battery::two_runners_exactly_one_applies(&backend).await;
    battery::a_runner_whose_lease_was_taken_over_stops_without_writing(&backend).await;
    battery::an_edited_applied_migration_is_refused_with_exit_4(&backend).await;
    battery::dry_run_reports_counts_and_samples_without_writing(&backend).await;
    battery::code_migrations_run_as_version_steps_next_to_files(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blog_migrations_give_the_reference_result_on_native_tables() {
    let Some(server) =
        Server::connect("the_blog_migrations_give_the_reference_result_on_native_tables").await
    else {
        return;
    };
    let backend = NativeBlog(Arc::new(server));
    let store = backend.fresh().await;
    battery::migrates_like_the_memory_store(
        store,
        &battery::blog(12, 3),
        &[(1, battery::RELEASE2), (2, battery::RELEASE3)],
        5,
    )
    .await;
}

/// Serial writes (the lazy client's puts and deletes of a kind with a pending migration, issue
/// 35): a put creates a row (`INSERT ... IF NOT EXISTS`) and replaces one (`UPDATE ... IF
/// EXISTS`), a delete removes it (`DELETE ... IF EXISTS`) and succeeds where no row is, on a
/// native table, a native table of key columns only and the document layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serial_puts_and_deletes_on_every_layout() {
    let Some(server) = Server::connect("serial_puts_and_deletes_on_every_layout").await else {
        return;
    };
    let (_, url) = server
        .keyspace(
            &[
                "pets (id text PRIMARY KEY, tern_version bigint, name text)",
                "tags (id text PRIMARY KEY)",
            ],
            "native=pets,tags",
        )
        .await;
    let store = tern_cassandra::open(&url).await.unwrap();
    let serial = store.features().serial_writes.expect("serial writes");
    // Each kind: its version, the first put's properties and the second's.
    type Props = Vec<(&'static str, Value)>;
    let sides: [(&str, u64, Props, Props); 3] = [
        (
            "pets",
            2,
            vec![("name", Value::from("a"))],
            vec![("name", Value::from("b"))],
        ),
        (
            "docs",
            2,
            vec![("x", Value::Int(1))],
            vec![("x", Value::Int(2))],
        ),
        ("tags", 0, vec![], vec![]),
    ];
    for (kind, version, first, second) in sides {
        let key = Key::new(kind, "k").unwrap();
        for props in [first, second] {
            let e = entity(kind, "k", version, &props);
            let done = serial.write_serial(vec![Write::Put(e.clone())]).await;
            assert_eq!(done.unwrap(), [WriteOutcome::Applied], "{kind}");
            assert_eq!(store.get(&key).await.unwrap(), Some(e), "{kind}");
        }
        for _ in 0..2 {
            let done = serial.write_serial(vec![Write::Delete(key.clone())]).await;
            assert_eq!(done.unwrap(), [WriteOutcome::Applied], "{kind}");
            assert_eq!(store.get(&key).await.unwrap(), None, "{kind}");
        }
    }
}
