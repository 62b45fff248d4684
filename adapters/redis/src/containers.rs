//! Plain strings, sets, lists and sorted sets as entities: the entity of each
//! (one property), and the read script that returns a container with its
//! version tag in one round trip.
//!
//! | layout | Redis type | entity |
//! |---|---|---|
//! | `Text` | string | `{value: <text, or bytes when not UTF-8>}` |
//! | `Set` | set | `{members: [<text or bytes>...]}` in byte order |
//! | `List` | list | `{items: [<text or bytes>...]}` in list order |
//! | `SortedSet` | zset | `{members: [[<member>, <score: float>]...]}` in score order |
//!
//! The version tag lives in a companion string key ([`crate::codec::Keys::version_key`]),
//! absent for version 0, written with the container in one script and given its TTL.

use tern_core::model::{Entity, Key, Map, Value, Version};
use tern_core::store::{Error, ErrorKind, Result};

use crate::config::KindLayout;

/// The one property of an entity of `layout`.
pub(crate) fn property(layout: KindLayout) -> &'static str {
    match layout {
        KindLayout::Text => "value",
        KindLayout::List => "items",
        _ => "members",
    }
}

fn shape(layout: KindLayout) -> &'static str {
    match layout {
        KindLayout::Text => "{value: <string or bytes>}",
        KindLayout::Set => {
            "{members: [<string or bytes>...]} (not empty: Redis keeps no empty set)"
        }
        KindLayout::List => {
            "{items: [<string or bytes>...]} (not empty: Redis keeps no empty list)"
        }
        KindLayout::SortedSet => {
            "{members: [[<string or bytes>, <number>]...]} (not empty: Redis keeps no empty sorted set)"
        }
        KindLayout::Hash | KindLayout::Json => "a map",
    }
}

fn bad(entity_key: &Key, layout: KindLayout, found: &str) -> Error {
    Error::new(
        ErrorKind::InvalidData,
        format!(
            "an entity of a Redis {} kind is {}; found {found}",
            layout.type_name(),
            shape(layout)
        ),
    )
    .with_context("key", entity_key.to_string())
}

fn bytes_of(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(s) => Some(s.clone().into_bytes()),
        Value::Bytes(b) => Some(b.clone()),
        _ => None,
    }
}

/// Text when it is UTF-8, else bytes.
fn value_of(bytes: Vec<u8>) -> Value {
    match String::from_utf8(bytes) {
        Ok(s) => Value::String(s),
        Err(e) => Value::Bytes(e.into_bytes()),
    }
}

/// The score of a sorted-set member as Redis reads it (`inf`, `-inf`, decimal).
fn score_text(score: f64) -> String {
    if score.is_infinite() {
        if score > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{score}")
    }
}

/// The items of the write script for a container entity: its version, then
/// the value (`Text`), the members (`Set`), the items (`List`) or
/// score/member pairs (`SortedSet`, as ZADD takes them).
///
/// # Errors
/// `InvalidData` naming the key when the entity does not have the layout's
/// one property of the right shape (an empty container included: Redis
/// deletes empty containers).
pub(crate) fn to_items(entity: &Entity, layout: KindLayout) -> Result<Vec<Vec<u8>>> {
    let name = property(layout);
    let describe = || {
        format!(
            "the properties {:?}",
            entity.value.keys().collect::<Vec<_>>()
        )
    };
    let value = match (entity.value.len(), entity.value.get(name)) {
        (1, Some(v)) => v,
        _ => return Err(bad(&entity.key, layout, &describe())),
    };
    let mut out = vec![entity.version.to_string().into_bytes()];
    match (layout, value) {
        (KindLayout::Text, v) => {
            out.push(bytes_of(v).ok_or_else(|| bad(&entity.key, layout, "another type"))?);
        }
        (KindLayout::Set | KindLayout::List, Value::Array(items)) if !items.is_empty() => {
            for item in items {
                out.push(
                    bytes_of(item)
                        .ok_or_else(|| bad(&entity.key, layout, "a member of another type"))?,
                );
            }
        }
        (KindLayout::SortedSet, Value::Array(items)) if !items.is_empty() => {
            for item in items {
                let pair = match item {
                    Value::Array(pair) if pair.len() == 2 => pair,
                    _ => return Err(bad(&entity.key, layout, "a member that is no pair")),
                };
                let score = match &pair[1] {
                    Value::Float(f) if !f.is_nan() => *f,
                    #[allow(clippy::cast_precision_loss)]
                    Value::Int(i) => *i as f64,
                    _ => return Err(bad(&entity.key, layout, "a score that is not a number")),
                };
                out.push(score_text(score).into_bytes());
                out.push(
                    bytes_of(&pair[0])
                        .ok_or_else(|| bad(&entity.key, layout, "a member of another type"))?,
                );
            }
        }
        _ => return Err(bad(&entity.key, layout, &describe())),
    }
    Ok(out)
}

/// The entity of a container read by [`READ_SCRIPT`]: `reply` is the version
/// tag then the items (`None`: no key of the layout's type there).
///
/// # Errors
/// `InvalidData` for a version tag that is not a number, or a score that Redis
/// should not have returned.
pub(crate) fn from_items(
    key: Key,
    layout: KindLayout,
    reply: Option<Vec<Vec<u8>>>,
) -> Result<Option<Entity>> {
    let Some(reply) = reply else {
        return Ok(None);
    };
    let mut it = reply.into_iter();
    let version: Version = it
        .next()
        .and_then(|v| String::from_utf8(v).ok())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidData,
                "the version tag of a container is not a non-negative integer",
            )
            .with_context("key", key.to_string())
        })?;
    let value = match layout {
        KindLayout::Text => value_of(it.next().unwrap_or_default()),
        KindLayout::Set => {
            let mut members: Vec<Vec<u8>> = it.collect();
            members.sort();
            Value::Array(members.into_iter().map(value_of).collect())
        }
        KindLayout::List => Value::Array(it.map(value_of).collect()),
        KindLayout::SortedSet => {
            let mut pairs = Vec::new();
            while let (Some(member), Some(score)) = (it.next(), it.next()) {
                let score: f64 = String::from_utf8_lossy(&score).parse().map_err(|_| {
                    Error::new(ErrorKind::InvalidData, "a sorted-set score is not a number")
                        .with_context("key", key.to_string())
                })?;
                pairs.push(Value::Array(vec![value_of(member), Value::Float(score)]));
            }
            Value::Array(pairs)
        }
        KindLayout::Hash | KindLayout::Json => {
            return Err(Error::new(
                ErrorKind::Unexpected,
                "a hash or JSON kind was read as a container",
            ));
        }
    };
    let mut map = Map::new();
    map.insert(property(layout).to_owned(), value);
    Ok(Some(Entity {
        key,
        version,
        value: map,
    }))
}

/// Reads one container and its version tag atomically. KEYS: the key, its
/// version key; ARGV: the layout code (`t`, `s`, `l`, `z`). Returns nil when
/// the key is absent or of another type, else `{version, items...}` (the
/// value; the members; the items; member/score pairs by score).
pub(crate) const READ_SCRIPT: &str = concat!(
    include_str!("../lua/text_tag.lua"),
    include_str!("../lua/container_read.lua"),
    include_str!("../lua/container_answer.lua")
);

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entity(name: &str, value: Value) -> Entity {
        let mut map = Map::new();
        map.insert(name.to_owned(), value);
        let mut e = Entity::new(Key::new("k", "1").unwrap(), map);
        e.version = 3;
        e
    }

    #[test]
    fn every_layout_round_trips_through_its_items() {
        let cases = [
            (
                KindLayout::Text,
                entity("value", Value::Bytes(vec![0xff, 0])),
            ),
            (KindLayout::Text, entity("value", Value::from("hello"))),
            (
                KindLayout::Set,
                entity("members", Value::Array(vec!["a".into(), "b".into()])),
            ),
            (
                KindLayout::List,
                entity(
                    "items",
                    Value::Array(vec!["b".into(), "a".into(), "b".into()]),
                ),
            ),
            (
                KindLayout::SortedSet,
                entity(
                    "members",
                    Value::Array(vec![
                        Value::Array(vec!["x".into(), Value::Float(-1.5)]),
                        Value::Array(vec!["y".into(), Value::Float(f64::INFINITY)]),
                    ]),
                ),
            ),
        ];
        for (layout, e) in cases {
            let mut items = to_items(&e, layout).unwrap();
            if layout == KindLayout::SortedSet {
                // ZRANGE WITHSCORES answers member, score.
                for pair in items[1..].chunks_mut(2) {
                    pair.swap(0, 1);
                }
            }
            let back = from_items(e.key.clone(), layout, Some(items))
                .unwrap()
                .unwrap();
            assert_eq!(back, e, "{layout:?}");
        }
    }

    #[test]
    fn wrong_shapes_and_empty_containers_are_refused_naming_the_shape() {
        let empty = entity("members", Value::Array(vec![]));
        let err = to_items(&empty, KindLayout::Set).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        assert!(err.to_string().contains("members"), "{err}");
        let extra = entity("name", Value::from("x"));
        assert!(to_items(&extra, KindLayout::List).is_err());
        let nan = entity(
            "members",
            Value::Array(vec![Value::Array(vec!["x".into(), Value::Float(f64::NAN)])]),
        );
        assert!(to_items(&nan, KindLayout::SortedSet).is_err());
    }
}
