//! The engine's `build` stage on the in-memory store: the new kind holds the join's rows, the
//! sources are unchanged, an unsafe build and a build into a kind in use are refused before any
//! write, and `--force-unsafe` keeps the first row.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use tern_core::migrate::source::{Migration, MigrationSet};
use tern_core::migrate::{Migrator, RunOptions};

use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::memory::MemoryStore;
use tern_core::store::{Filter, Store, Write};

fn set(script: &str) -> MigrationSet {
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(1, "build", "0001_build.tern", script).unwrap())
        .unwrap();
    set
}

async fn load(store: &dyn Store, rooms: &[(i64, i64, i64)]) {
    let mut writes = Vec::new();
    for h in 1..=2i64 {
        let value = Map::from([
            ("id".to_owned(), Value::Int(h)),
            ("city".to_owned(), Value::String(format!("c{h}"))),
        ]);
        writes.push(Write::Put(Entity::new(
            Key::new("hotel", h).unwrap(),
            value,
        )));
    }
    for &(no, hotel, rate) in rooms {
        let value = Map::from([
            ("no".to_owned(), Value::Int(no)),
            ("hotel".to_owned(), Value::Int(hotel)),
            ("rate".to_owned(), Value::Int(rate)),
        ]);
        writes.push(Write::Put(Entity::new(
            Key::new("room", no).unwrap(),
            value,
        )));
    }
    store.write_batch(writes).await.unwrap();
}

const SAFE: &str = "build by_city from hotel join room on hotel.id = room.hotel key hotel.city cluster room.no select room.rate\n";
const UNSAFE: &str =
    "build by_city from hotel join room on hotel.id = room.hotel key hotel.city select room.rate\n";

#[tokio::test]
async fn build_fills_a_new_kind_with_the_joins_rows() {
    let store = Arc::new(MemoryStore::new());
    load(store.as_ref(), &[(11, 1, 80), (12, 1, 90), (21, 2, 70)]).await;
    Migrator::new(store.clone(), set(SAFE))
        .up(None)
        .await
        .unwrap();
    let c1 = store
        .get(&Key::new("by_city", "c1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c1.version, 0);
    let Some(Value::Array(rows)) = c1.value.get("rows") else {
        panic!("{c1:?}")
    };
    let rates: Vec<_> = rows
        .iter()
        .map(|r| match r {
            Value::Map(m) => (
                m["room_no"].clone(),
                m["room_rate"].clone(),
                m["hotel_city"].clone(),
            ),
            _ => panic!("{r:?}"),
        })
        .collect();
    assert_eq!(
        rates,
        vec![
            (Value::Int(11), Value::Int(80), Value::from("c1")),
            (Value::Int(12), Value::Int(90), Value::from("c1")),
        ]
    );
    assert_eq!(store.count("by_city", Filter::all()).await.unwrap(), 2);
    // The sources are only read.
    assert_eq!(
        store
            .get(&Key::new("room", 11).unwrap())
            .await
            .unwrap()
            .unwrap()
            .version,
        0
    );
}

#[tokio::test]
async fn an_unsafe_build_is_refused_before_writing_unless_forced() {
    let store = Arc::new(MemoryStore::new());
    load(store.as_ref(), &[(11, 1, 80), (12, 1, 90)]).await;
    let err = Migrator::new(store.clone(), set(UNSAFE))
        .up(None)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("unsafe") && text.contains("\"c1\""), "{text}");
    assert_eq!(store.count("by_city", Filter::all()).await.unwrap(), 0);

    let forced = Arc::new(MemoryStore::new());
    load(forced.as_ref(), &[(11, 1, 80), (12, 1, 90)]).await;
    Migrator::new(forced.clone(), set(UNSAFE))
        .with_run_options(RunOptions {
            force_unsafe: true,
            ..RunOptions::default()
        })
        .up(None)
        .await
        .unwrap();
    let c1 = forced
        .get(&Key::new("by_city", "c1").unwrap())
        .await
        .unwrap()
        .unwrap();
    let Some(Value::Array(rows)) = c1.value.get("rows") else {
        panic!("{c1:?}")
    };
    assert_eq!(rows.len(), 1);
}

#[tokio::test]
async fn a_build_into_a_kind_in_use_is_refused() {
    let store = Arc::new(MemoryStore::new());
    load(store.as_ref(), &[(11, 1, 80)]).await;
    store
        .write_batch(vec![Write::Put(Entity::new(
            Key::new("by_city", "x").unwrap(),
            Map::new(),
        ))])
        .await
        .unwrap();
    let err = Migrator::new(store.clone(), set(SAFE))
        .up(None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("already holds 1 entities"),
        "{err}"
    );
    assert!(
        store
            .get(&Key::new("by_city", "c1").unwrap())
            .await
            .unwrap()
            .is_none()
    );
}
