//! The partitions of a kind ([`tern_core::store::Partitions`]) on the server at
//! `TERN_IT_MONGODB_URL`: the test kit's conformance check (disjoint,
//! covering, written-meanwhile, pushdown per partition) in a database of its
//! own, dropped afterwards; and ids of several BSON types, each in exactly one
//! partition. Without the variable, the tests print why and are skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Filter, ScanRequest, Store, Write};

/// A store in a fresh database, and that database's name, or `None` (said on stderr).
async fn store(test: &str) -> Option<(Arc<dyn Store>, String, String)> {
    let Ok(url) = std::env::var("TERN_IT_MONGODB_URL") else {
        eprintln!("{test}: skipped: TERN_IT_MONGODB_URL is not set");
        return None;
    };
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let db = format!("tern_parts_{}_{nonce}", std::process::id());
    let (main, query) = match url.split_once('?') {
        Some((m, q)) => (m.trim_end_matches('/').to_owned(), format!("?{q}")),
        None => (url.trim_end_matches('/').to_owned(), String::new()),
    };
    let store = tern_mongodb::open(&format!("{main}/{db}{query}"))
        .await
        .unwrap_or_else(|e| panic!("{test}: cannot open the store: {e}"));
    Some((store, url, db))
}

async fn drop_database(url: &str, db: &str) {
    let client = mongodb::Client::with_uri_str(url).await.unwrap();
    client.database(db).drop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_disjoint_and_cover_the_kind() {
    let Some((store, url, db)) = store("partitions").await else {
        return;
    };
    assert!(store.features().partitions.is_some());
    let result = tern_testkit::conformance::partitions(store.as_ref()).await;
    drop_database(&url, &db).await;
    result.unwrap_or_else(|f| panic!("{f}"));
}

/// Ids of numbers and strings in one kind: `$gte`/`$lt` compare
/// within one BSON type only, so the ranges must name the types in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_of_several_types_are_each_in_one_partition() {
    let Some((store, url, db)) = store("mixed ids").await else {
        return;
    };
    let mut writes = Vec::new();
    for i in 0..100i64 {
        let id = match i % 2 {
            0 => Value::Int(i),
            _ => Value::String(format!("s{i:03}")),
        };
        writes.push(Write::Put(Entity::new(
            Key::new("mixed", id).unwrap(),
            Map::new(),
        )));
    }
    store.write_batch(writes).await.unwrap();
    let parts = store.features().partitions.unwrap();
    let mut seen: BTreeMap<Key, usize> = BTreeMap::new();
    let split = parts.split("mixed", 6).await.unwrap();
    assert!(split.len() > 1, "{split:?}");
    for (i, p) in split.iter().enumerate() {
        let mut cursor = None;
        loop {
            let page = parts
                .scan_partition(
                    "mixed",
                    p,
                    ScanRequest {
                        filter: Filter::all(),
                        cursor,
                        limit: 9,
                    },
                )
                .await
                .unwrap();
            for e in page.entities {
                if let Some(j) = seen.insert(e.key.clone(), i) {
                    panic!("{} in partitions {} and {}", e.key, split[j].label, p.label);
                }
            }
            cursor = page.cursor;
            if cursor.is_none() {
                break;
            }
        }
    }
    drop_database(&url, &db).await;
    assert_eq!(seen.len(), 100, "{split:?}");
}
