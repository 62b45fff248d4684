//! Item 2 of issue 12: whatever the store accepts, an export of it imports back
//! unchanged, through the same JSON Lines functions `tern export` and `tern
//! import` use, at the deepest nesting and with the largest values.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use proptest::prelude::*;
use tern_core::model::arb::{arb_name, arb_scalar};
use tern_core::model::json::{entity_from_json_line, entity_to_json_line};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::embedded::EmbeddedStore;
use tern_core::store::{ScanRequest, Store, Write};

/// The store's nesting limit (arrays and maps below a property).
const STORE_DEPTH: usize = 256;

/// `leaf` wrapped in `depth` arrays and maps, in the order `shape` gives
/// (true: a one-element array; false: a map with one key, often a tag name
/// that the JSON form has to escape with `$map`, doubling its depth there).
fn nest(leaf: Value, depth: usize, shape: &[(bool, String)]) -> Value {
    let mut v = leaf;
    for i in 0..depth {
        let (array, name) = &shape[i % shape.len()];
        v = if *array {
            Value::Array(vec![v])
        } else {
            let mut m = Map::new();
            m.insert(name.clone(), v);
            Value::Map(m)
        };
    }
    v
}

fn round_trip(store: &EmbeddedStore, entity: Entity) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        store
            .write_batch(vec![Write::Put(entity.clone())])
            .await
            .unwrap();
        let page = store
            .scan(&entity.key.kind, ScanRequest::all(None, 10))
            .await
            .unwrap();
        let stored = page
            .entities
            .into_iter()
            .find(|e| e.key == entity.key)
            .unwrap();
        let line = entity_to_json_line(&stored);
        let back = entity_from_json_line(&line)
            .map_err(|e| TestCaseError::fail(format!("import refused the export: {e}")))?;
        prop_assert_eq!(&back, &entity);
        store
            .write_batch(vec![Write::Delete(entity.key.clone())])
            .await
            .unwrap();
        Ok(())
    })
}

fn shape() -> impl Strategy<Value = Vec<(bool, String)>> {
    prop::collection::vec((any::<bool>(), arb_name()), 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn export_import_round_trips_the_deepest_values_the_store_accepts(
        depth in (STORE_DEPTH - 8)..=STORE_DEPTH,
        shape in shape(),
        leaf in arb_scalar(),
        version in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path().join("s.redb")).unwrap();
        let mut value = Map::new();
        value.insert("deep".into(), nest(leaf.clone(), depth, &shape));
        let entity = Entity { key: Key::new("deep", Value::Int(7)).unwrap(), version, value };
        round_trip(&store, entity)?;
        // One level more: the store refuses it, and so does the import, clearly.
        let mut value = Map::new();
        value.insert("deep".into(), nest(leaf, STORE_DEPTH + 1, &shape));
        let too_deep = Entity { key: Key::new("deep", Value::Int(8)).unwrap(), version: 0, value };
        let err = entity_from_json_line(&entity_to_json_line(&too_deep)).unwrap_err();
        prop_assert!(err.to_string().contains("nested deeper"), "{}", err);
    }

    #[test]
    fn export_import_round_trips_the_largest_values(
        len in 0usize..(2 << 20),
        byte in any::<u8>(),
        int in prop_oneof![Just(i64::MIN), Just(i64::MAX), any::<i64>()],
        float in prop_oneof![Just(f64::MAX), Just(f64::MIN_POSITIVE), Just(f64::MIN), Just(5e-324), any::<f64>()],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path().join("s.redb")).unwrap();
        let mut value = Map::new();
        value.insert("s".into(), Value::String(char::from(b'a' + byte % 26).to_string().repeat(len)));
        value.insert("b".into(), Value::Bytes(vec![byte; len / 2]));
        value.insert("i".into(), Value::Int(int));
        value.insert("t".into(), Value::Timestamp(int));
        value.insert("f".into(), Value::Float(float));
        value.insert("wide".into(), Value::Array((0..len.min(100_000) as i64).map(Value::Int).collect()));
        let entity = Entity { key: Key::new("big", Value::Int(int)).unwrap(), version: u64::MAX, value };
        round_trip(&store, entity)?;
    }
}
