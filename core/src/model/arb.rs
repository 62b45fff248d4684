//! proptest strategies for the data model (compiled for tests and with the `arbitrary` feature).

use proptest::prelude::*;

use super::{Entity, Key, Map, Value};

/// Any scalar value, including NaN, infinities and `-0.0`.
pub fn arb_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        prop_oneof![
            any::<f64>(),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(1.0)
        ]
        .prop_map(Value::Float),
        ".{0,8}".prop_map(Value::String),
        prop::collection::vec(any::<u8>(), 0..8).prop_map(Value::Bytes),
        any::<i64>().prop_map(Value::Timestamp),
    ]
}

/// Property names, including the names that the JSON mapping reserves as tags.
pub fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,4}",
        Just("$bytes".to_owned()),
        Just("$date".to_owned()),
        Just("$float".to_owned()),
        Just("$map".to_owned()),
        Just("$oid".to_owned()),
        Just(String::new()),
    ]
}

/// Any value, nested up to three levels.
pub fn arb_value() -> impl Strategy<Value = Value> {
    arb_scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(arb_name(), inner, 0..4).prop_map(Value::Map),
        ]
    })
}

/// A map of properties.
pub fn arb_map() -> impl Strategy<Value = Map> {
    prop::collection::btree_map(arb_name(), arb_value(), 0..5)
}

/// An id: a string or an integer.
pub fn arb_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        "[a-z0-9]{1,6}".prop_map(Value::String),
        any::<i64>().prop_map(Value::Int)
    ]
}

/// An entity of the given kind.
pub fn arb_entity(kind: &'static str) -> impl Strategy<Value = Entity> {
    (arb_id(), 0u64..5, arb_map()).prop_map(move |(id, version, value)| Entity {
        key: Key {
            kind: kind.to_owned(),
            id,
        },
        version,
        value,
    })
}
