//! `rename kind` on Cassandra's native layout: the new table created like the old one, or
//! refused when it differs. What a crash or a writer between the copy and the delete leaves
//! is tested for every store that renames by copy (`tern_testkit::rename_copy_tests!`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tern_core::store::KindRename as _;
use tern_testkit::intercept::Forward as _;

use tern_cassandra::{CassConfig, CassStore};
use tern_core::model::{Entity, Key, Value};
use tern_core::store::{ErrorKind, Filter, RenameKindPage, RenameKindRequest, Store, Write};
use tern_integration_tests::cassandra::CassBackend;
use tern_testkit::battery::{self, entity, report};
use tern_testkit::conformance;
use tern_testkit::pages::rename_pass;

use super::{backend_with, columns};
use tern_core::store::StoreExt;

/// A raw row of a document table: id, version, doc.
type DocRow = (String, Option<i64>, Option<Vec<u8>>);

/// The keyspace of a store URL (`cassandra://host:port/ks?options`).
fn keyspace_of(url: &str) -> String {
    let path = url.rsplit('/').next().unwrap();
    path.split('?').next().unwrap().to_owned()
}

/// A store on a fresh keyspace (its concrete type, for the test hook), the keyspace and URL.
async fn fresh(backend: &CassBackend) -> (CassStore, String, String) {
    let url = backend.fresh_url();
    let store = CassStore::connect(CassConfig::from_url(&url).unwrap())
        .await
        .unwrap();
    (store, keyspace_of(&url), url)
}

fn ent(kind: &str, id: i64, n: i64) -> Entity {
    entity(kind, id, 1, &[("n", Value::Int(n))])
}

fn request(from: &str, to: &str, limit: usize) -> RenameKindRequest {
    RenameKindRequest {
        from: from.into(),
        to: to.into(),
        cursor: None,
        limit,
    }
}

async fn entities(store: &dyn Store, kind: &str) -> Vec<Entity> {
    conformance::scan_all(store, kind, &Filter::all(), 50)
        .await
        .unwrap()
        .into_values()
        .collect()
}

/// The rows of a document table as stored, by id.
async fn raw_docs(backend: &CassBackend, ks: &str, table: &str) -> Vec<DocRow> {
    let session = backend.session().await.unwrap();
    let mut rows: Vec<DocRow> = session
        .query_unpaged(
            format!("SELECT id, tern_version, doc FROM {ks}.{table}"),
            &[],
        )
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .rows::<DocRow>()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    rows.sort();
    rows
}

/// Native tables: `tern up` renames a native table's kind to a kind named in `native=`
/// without a table: the new table is created with the old one's columns and types, its JSON
/// columns registered, every row moved (collections, JSON text, empty cells). A new kind
/// whose table differs, one not named native, and a document table are refused before
/// anything is written, naming both tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_rename_of_a_native_table_creates_the_new_table_like_the_old() {
    let test = "cassandra_rename_of_a_native_table_creates_the_new_table_like_the_old";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (ks, url, _) = backend
        .native_store(
            &[
                "old (id text PRIMARY KEY, tern_version bigint, title text, n bigint, \
                 tags list<text>, meta text)",
                "other (id text PRIMARY KEY, title text)",
            ],
            "native=old,new,other",
        )
        .await
        .unwrap();
    // `meta` holds tern's JSON (any value), as a tern `add` would have registered it.
    let session = backend.session().await.unwrap();
    session
        .query_unpaged(
            format!("INSERT INTO {ks}.tern_json_columns (name) VALUES ('old.meta')"),
            &[],
        )
        .await
        .unwrap();
    let store = tern_cassandra::open(&url).await.unwrap();
    let meta = Value::Map(battery::map(&[
        ("a", Value::Int(1)),
        ("b", Value::Array(vec![Value::Null, Value::from("x")])),
    ]));
    let mut data: Vec<Entity> = (0..5)
        .map(|i| {
            entity(
                "old",
                format!("p{i}"),
                u64::try_from(i).unwrap() % 2 + 1,
                &[
                    ("title", Value::from(format!("t{i}"))),
                    ("n", Value::Int(i)),
                    (
                        "tags",
                        Value::Array(vec![Value::from("a"), Value::from("b")]),
                    ),
                    ("meta", meta.clone()),
                ],
            )
        })
        .collect();
    // Empty cells: no tags, no meta.
    data.push(entity("old", "bare", 1, &[("title", Value::from("bare"))]));
    data.push(entity("docs", "d1", 0, &[("x", Value::Int(1))]));
    battery::load(store.as_ref(), &data).await;

    // Checked before anything is written: limit 0 creates no table.
    assert_eq!(
        store.rename_kind(request("old", "new", 0)).await.unwrap(),
        RenameKindPage::default()
    );
    assert!(columns(&backend, &ks, "new").await.is_empty());
    for (to, from, says) in [
        ("other", "old", "does not have the columns of"),
        ("plain", "old", "add plain to native="),
        ("new", "docs", "is a document table"),
    ] {
        let err = store.rename_kind(request(from, to, 0)).await.expect_err(to);
        let text = err.to_string();
        assert_eq!(err.kind(), ErrorKind::ConfigInvalid, "{text}");
        assert!(text.contains(says) && text.contains(to), "{text}");
    }
    let err = battery::migrator(Arc::clone(&store), &[(1, "rename kind old to other")], 2)
        .up(None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("column meta text (JSON) is missing"),
        "{err}"
    );
    assert!(columns(&backend, &ks, "new").await.is_empty());

    let scripts: &[(u32, &str)] = &[(1, "rename kind old to new")];
    let before = battery::export(store.as_ref()).await;
    battery::migrator(Arc::clone(&store), scripts, 2)
        .up(None)
        .await
        .unwrap();
    assert_eq!(
        battery::export(store.as_ref()).await,
        battery::reference(&data, scripts),
        "from {before}"
    );
    assert_eq!(
        columns(&backend, &ks, "new").await,
        columns(&backend, &ks, "old").await,
        "the new table has the old one's columns and types"
    );
    // A store with a fresh schema cache reads the JSON column back as a map.
    let fresh = tern_cassandra::open(&url).await.unwrap();
    let p0 = fresh
        .get(&Key::new("new", "p0").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p0.get("meta"), Some(&meta));
    assert_eq!(fresh.count("old", Filter::all()).await.unwrap(), 0);
    report("cassandra", test, "passed");
}
