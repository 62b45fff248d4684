//! `rename kind` on Cassandra moves each row by a copy (`INSERT ... IF NOT EXISTS`) and an
//! exact conditional delete: what a crash or a concurrent writer between the two leaves, and
//! the native layout (the new table created like the old one, or refused when it differs).

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

/// A move interrupted after its copy (the new table holds a row identical to the source)
/// completes on the next run: no collision, every row moved byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_rename_completes_a_move_interrupted_after_the_copy() {
    let test = "cassandra_rename_completes_a_move_interrupted_after_the_copy";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (store, ks, _) = fresh(&backend).await;
    battery::load(
        &store,
        &(1..=7).map(|i| ent("old", i, i)).collect::<Vec<_>>(),
    )
    .await;
    let originals = raw_docs(&backend, &ks, "old").await;
    assert_eq!(originals.len(), 7);
    // The crash: ids 2 and 5 were copied, their sources not yet deleted (the new kind's
    // document table exists, as the first batch created it).
    store.put(ent("new", 99, 0)).await.unwrap();
    store.delete(&Key::new("new", 99).unwrap()).await.unwrap();
    let session = backend.session().await.unwrap();
    for (id, version, doc) in originals
        .iter()
        .filter(|(id, ..)| id.as_str() == "2" || id.as_str() == "5")
    {
        session
            .query_unpaged(
                format!("INSERT INTO {ks}.new (id, tern_version, doc) VALUES (?, ?, ?)"),
                (id, version, doc),
            )
            .await
            .unwrap();
    }
    let page = rename_pass(&store, "old", "new", 3).await.unwrap();
    assert_eq!(page.renamed, 7, "{page:?}");
    assert!(page.collisions.is_empty(), "{page:?}");
    assert!(raw_docs(&backend, &ks, "old").await.is_empty());
    assert_eq!(
        raw_docs(&backend, &ks, "new").await,
        originals,
        "moved exactly"
    );
    let again = rename_pass(&store, "old", "new", 3).await.unwrap();
    assert_eq!((again.renamed, again.collisions.len()), (0, 0));
    report("cassandra", test, "passed");
}

/// An id the new kind already holds with another row is a collision: reported (again by a
/// second pass), both rows kept as they are, the others moved. `limit: 0` writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_rename_reports_a_collision_and_overwrites_nothing() {
    let test = "cassandra_rename_reports_a_collision_and_overwrites_nothing";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (store, _, _) = fresh(&backend).await;
    for i in 1..=5 {
        store.put(ent("old", i, i)).await.unwrap();
    }
    let checked = store.rename_kind(request("old", "new", 0)).await.unwrap();
    assert_eq!(checked, RenameKindPage::default());
    assert!(entities(&store, "new").await.is_empty());
    assert_eq!(
        entities(&store, "old").await.len(),
        5,
        "limit 0 moved nothing"
    );

    let squatter = entity("new", 4, 7, &[("mine", Value::Bool(true))]);
    store.put(squatter.clone()).await.unwrap();
    let page = rename_pass(&store, "old", "new", 2).await.unwrap();
    assert_eq!(page.renamed, 4, "{page:?}");
    assert_eq!(page.collisions, vec![Key::new("old", 4).unwrap()]);
    assert_eq!(entities(&store, "old").await, vec![ent("old", 4, 4)]);
    let mut want: Vec<Entity> = [1, 2, 3, 5].iter().map(|&i| ent("new", i, i)).collect();
    want.insert(3, squatter);
    assert_eq!(
        entities(&store, "new").await,
        want,
        "the new kind's entity untouched"
    );
    let again = rename_pass(&store, "old", "new", 10).await.unwrap();
    assert_eq!(again.renamed, 0);
    assert_eq!(again.collisions, vec![Key::new("old", 4).unwrap()]);
    report("cassandra", test, "passed");
}

/// A source row updated (or deleted) by another writer between the copy and the delete is
/// not lost: the stale copy is taken back and the move is tried again with the row as it is
/// now (a deleted one is not resurrected). A writer that changes a row at every attempt makes
/// the call fail with a temporary `Busy`, the row still under the old kind, no copy left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_rename_never_loses_an_update_made_between_copy_and_delete() {
    let test = "cassandra_rename_never_loses_an_update_made_between_copy_and_delete";
    let Some(backend) = backend_with(test).await else {
        return;
    };
    let (_, _, url) = fresh(&backend).await;
    let writer = tern_cassandra::open(&url).await.unwrap();
    battery::load(
        writer.as_ref(),
        &(1..=6).map(|i| ent("old", i, i)).collect::<Vec<_>>(),
    )
    .await;
    let mut updated = ent("old", 2, 222);
    updated.version = 2;
    // Once, between the first copy and delete: update id 2, delete id 5.
    let calls = Arc::new(AtomicUsize::new(0));
    let hooked = {
        let (writer, calls, updated) = (Arc::clone(&writer), Arc::clone(&calls), updated.clone());
        CassStore::connect(CassConfig::from_url(&url).unwrap())
            .await
            .unwrap()
            .with_after_copy_hook(move |keys| {
                let (writer, calls, updated) =
                    (Arc::clone(&writer), Arc::clone(&calls), updated.clone());
                Box::pin(async move {
                    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                        assert!(keys.contains(&Key::new("old", 2).unwrap()), "{keys:?}");
                        assert!(keys.contains(&Key::new("old", 5).unwrap()), "{keys:?}");
                        let outcomes = writer
                            .write_batch(vec![
                                Write::Replace {
                                    expected: ent("old", 2, 2),
                                    new: updated,
                                },
                                Write::Delete(Key::new("old", 5).unwrap()),
                            ])
                            .await
                            .unwrap();
                        assert!(
                            outcomes
                                .iter()
                                .all(|o| *o == tern_core::store::WriteOutcome::Applied),
                            "{outcomes:?}"
                        );
                    }
                })
            })
    };
    let page = rename_pass(&hooked, "old", "new", 10).await.unwrap();
    assert!(
        calls.load(Ordering::SeqCst) >= 2,
        "the changed row was tried again"
    );
    assert_eq!(page.renamed, 5, "{page:?}");
    assert!(page.collisions.is_empty(), "{page:?}");
    assert!(entities(writer.as_ref(), "old").await.is_empty());
    let mut moved = updated.clone();
    moved.key = Key::new("new", 2).unwrap();
    let want = vec![
        ent("new", 1, 1),
        moved,
        ent("new", 3, 3),
        ent("new", 4, 4),
        ent("new", 6, 6),
    ];
    assert_eq!(
        entities(writer.as_ref(), "new").await,
        want,
        "the update kept, the delete kept"
    );

    // A writer that changes id 7 at every attempt.
    writer.put(ent("old", 7, 7)).await.unwrap();
    let bumps = Arc::new(AtomicUsize::new(0));
    let busy = {
        let (writer, bumps) = (Arc::clone(&writer), Arc::clone(&bumps));
        CassStore::connect(CassConfig::from_url(&url).unwrap())
            .await
            .unwrap()
            .with_after_copy_hook(move |_| {
                let (writer, bumps) = (Arc::clone(&writer), Arc::clone(&bumps));
                Box::pin(async move {
                    let n = i64::try_from(bumps.fetch_add(1, Ordering::SeqCst)).unwrap();
                    writer.put(ent("old", 7, 1000 + n)).await.unwrap();
                })
            })
    };
    let err = rename_pass(&busy, "old", "new", 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    assert!(err.is_temporary(), "{err}");
    assert!(err.to_string().contains("nothing was lost"), "{err}");
    let last = i64::try_from(bumps.load(Ordering::SeqCst)).unwrap() - 1;
    assert_eq!(last, 4, "one change per attempt, 5 attempts");
    assert_eq!(
        entities(writer.as_ref(), "old").await,
        vec![ent("old", 7, 1000 + last)],
        "the last update is under the old kind"
    );
    assert_eq!(
        entities(writer.as_ref(), "new").await.len(),
        5,
        "no copy of it left behind"
    );
    // Once the writer stops, the move completes.
    let page = rename_pass(writer.as_ref(), "old", "new", 10)
        .await
        .unwrap();
    assert_eq!(page.renamed, 1);
    assert_eq!(
        writer.get(&Key::new("new", 7).unwrap()).await.unwrap(),
        Some(ent("new", 7, 1000 + last))
    );
    report("cassandra", test, "passed");
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
