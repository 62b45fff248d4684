//! The data model: [`Value`], [`Key`] and [`Entity`].
//!
//! A store holds entities. An entity has a key (kind, id), a version (how many
//! version steps of its kind it has been through; a missing version property
//! means 0) and a value: a map from property names to values.
//!
//! The version is kept apart from the value: adapters store it in a property
//! of its own (default `_v`, see [`DEFAULT_VERSION_PROPERTY`]) and take it out
//! again on read, so code reading through tern never sees it in the map.

mod value;

pub mod codec;
pub mod json;
pub mod json_read;
pub mod keycode;

#[cfg(any(test, feature = "arbitrary"))]
pub mod arb;

use std::fmt;

use thiserror::Error;

pub use value::{Map, Value};

/// The default name of the property that holds an entity's version.
pub const DEFAULT_VERSION_PROPERTY: &str = "_v";

/// An entity's version: the number of version steps of its kind it has passed.
pub type Version = u64;

/// A key that cannot name an entity.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The kind is empty or has control characters.
    #[error("invalid kind {0:?}: a kind is a non-empty name without control characters")]
    Kind(String),
    /// The id has a type no store can use as a key.
    #[error(
        "invalid id {0}: an id is a string, integer, bytes, timestamp, array (composite) or map, never null or float"
    )]
    Id(String),
}

/// The key of an entity: its kind and its id within the kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// The kind: a MongoDB collection, a Redis key prefix, a Cassandra table.
    pub kind: String,
    /// The id within the kind. Never `Null` or `Float`.
    pub id: Value,
}

impl Key {
    /// Builds a key, checking that the kind and id are usable.
    ///
    /// # Errors
    /// [`KeyError`] for an empty kind or a null or float id.
    pub fn new(kind: impl Into<String>, id: impl Into<Value>) -> Result<Key, KeyError> {
        let kind = kind.into();
        if kind.is_empty() || kind.chars().any(char::is_control) {
            return Err(KeyError::Kind(kind));
        }
        let id = id.into();
        if !id_is_valid(&id) {
            return Err(KeyError::Id(id.to_string()));
        }
        Ok(Key { kind, id })
    }
}

fn id_is_valid(id: &Value) -> bool {
    match id {
        Value::Null | Value::Float(_) => false,
        Value::Array(parts) => !parts.is_empty() && parts.iter().all(id_is_valid),
        _ => true,
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id {
            Value::String(s) => write!(f, "{}:{}", self.kind, s),
            other => write!(f, "{}:{}", self.kind, other),
        }
    }
}

/// An entity: key, version and value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entity {
    /// The key.
    pub key: Key,
    /// How many version steps of its kind this entity has passed (0 when the
    /// version property is missing).
    pub version: Version,
    /// The properties, without the version property.
    pub value: Map,
}

impl Entity {
    /// A new entity at version 0.
    pub fn new(key: Key, value: Map) -> Entity {
        Entity {
            key,
            version: 0,
            value,
        }
    }

    /// The value of a top-level property, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.value.get(name)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_reject_null_and_float_ids() {
        assert!(Key::new("user", Value::Null).is_err());
        assert!(Key::new("user", Value::Float(1.0)).is_err());
        assert!(Key::new("", "x").is_err());
        assert!(Key::new("user", Value::Array(vec![])).is_err());
        assert!(Key::new("user", 7).is_ok());
    }

    #[test]
    fn key_display() {
        assert_eq!(Key::new("user", "42").unwrap().to_string(), "user:42");
        assert_eq!(Key::new("user", 42).unwrap().to_string(), "user:42");
    }
}
