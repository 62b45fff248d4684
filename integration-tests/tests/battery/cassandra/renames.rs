//! `rename kind` on Cassandra's native layout: the new table created like the old one, or
//! refused when it differs. What a crash or a writer between the copy and the delete leaves
//! is tested for every store that renames by copy (`tern_testkit::rename_copy_tests!`).

use std::sync::Arc;
use tern_core::store::{KindRename, Store};

use tern_core::model::{Entity, Key, Value};
use tern_core::store::{ErrorKind, Filter, RenameKindPage, RenameKindRequest};
use tern_testkit::battery::{self, entity, report};

use super::{backend_with, columns};

fn request(from: &str, to: &str, limit: usize) -> RenameKindRequest {
    RenameKindRequest {
        from: from.into(),
        to: to.into(),
        cursor: None,
        limit,
    }
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
        renames(store.as_ref())
            .rename_kind(request("old", "new", 0))
            .await
            .unwrap(),
        RenameKindPage::default()
    );
    assert!(columns(&backend, &ks, "new").await.is_empty());
    for (to, from, says) in [
        ("other", "old", "does not have the columns of"),
        ("plain", "old", "add plain to native="),
        ("new", "docs", "is a document table"),
    ] {
        let err = renames(store.as_ref())
            .rename_kind(request(from, to, 0))
            .await
            .expect_err(to);
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

/// The store's rename facet (every Cassandra store has it).
fn renames(store: &dyn Store) -> &dyn KindRename {
    store
        .features()
        .kind_rename
        .expect("the Cassandra store renames kinds")
}
