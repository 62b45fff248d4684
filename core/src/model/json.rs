//! The lossless JSON mapping of [`Value`], and the JSON Lines form of an [`Entity`].
//!
//! Plain JSON covers null, bool, int, float, string, array and map. The rest
//! uses a single-key object tag, in the spirit of MongoDB's extended JSON:
//!
//! | value | JSON |
//! |---|---|
//! | `Int(5)` | `5` |
//! | `Float(5.0)` | `5.0` (always with a fraction or exponent) |
//! | `Float(NaN)`, `±inf` | `{"$float": "NaN"}`, `{"$float": "inf"}`, `{"$float": "-inf"}` |
//! | `Bytes` | `{"$bytes": "<base64, standard alphabet, padded>"}` |
//! | `Timestamp(ms)` | `{"$date": <integer milliseconds since the epoch>}` |
//! | a map whose only key is one of `$float`, `$bytes`, `$date`, `$map` | `{"$map": {...}}` |
//!
//! Any other map, including one with a `$`-key such as `{"$oid": "..."}`, is
//! written as it is; adapters give such maps their own meaning (the MongoDB
//! adapter maps `{"$oid": hex}` to an ObjectId).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value as Json;
use thiserror::Error;

use super::{Entity, Key, Map, Value};

const TAG_FLOAT: &str = "$float";
const TAG_BYTES: &str = "$bytes";
const TAG_DATE: &str = "$date";
const TAG_MAP: &str = "$map";
const TAGS: [&str; 4] = [TAG_FLOAT, TAG_BYTES, TAG_DATE, TAG_MAP];

/// A JSON document that does not describe a tern value or entity.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{message}")]
pub struct JsonError {
    message: String,
}

impl JsonError {
    fn new(message: impl Into<String>) -> Self {
        JsonError {
            message: message.into(),
        }
    }
}

/// Converts a value to its JSON form.
pub fn to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => match serde_json::Number::from_f64(*f) {
            Some(n) => Json::Number(n),
            None => {
                let text = if f.is_nan() {
                    "NaN"
                } else if *f > 0.0 {
                    "inf"
                } else {
                    "-inf"
                };
                tagged(TAG_FLOAT, Json::String(text.to_owned()))
            }
        },
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => tagged(TAG_BYTES, Json::String(B64.encode(b))),
        Value::Timestamp(ms) => tagged(TAG_DATE, Json::from(*ms)),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Map(map) => {
            let obj = map_to_json(map);
            if map.len() == 1 && map.keys().all(|k| TAGS.contains(&k.as_str())) {
                tagged(TAG_MAP, obj)
            } else {
                obj
            }
        }
    }
}

/// Converts a map of properties to a JSON object (no `$map` escaping at the top).
pub fn map_to_json(map: &Map) -> Json {
    Json::Object(map.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
}

fn tagged(tag: &str, inner: Json) -> Json {
    let mut obj = serde_json::Map::new();
    obj.insert(tag.to_owned(), inner);
    Json::Object(obj)
}

/// Converts JSON to a value; the inverse of [`to_json`].
///
/// # Errors
/// A malformed tag (`{"$bytes": 5}`), or an integer outside the i64 range.
pub fn from_json(json: &Json) -> Result<Value, JsonError> {
    Ok(match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Int(i)
            } else if n.is_u64() {
                return Err(JsonError::new(format!(
                    "integer {n} is outside the 64-bit signed range; write it as a float ({n}.0) or a string"
                )));
            } else {
                Value::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::Array(items.iter().map(from_json).collect::<Result<_, _>>()?),
        Json::Object(obj) => {
            if obj.len() == 1
                && let Some((tag, inner)) = obj.iter().next()
            {
                match tag.as_str() {
                    TAG_FLOAT => return parse_float_tag(inner),
                    TAG_BYTES => return parse_bytes_tag(inner),
                    TAG_DATE => return parse_date_tag(inner),
                    TAG_MAP => {
                        return match inner {
                            Json::Object(_) => Ok(Value::Map(json_to_map(inner)?)),
                            _ => Err(JsonError::new("\"$map\" must hold an object")),
                        };
                    }
                    _ => {}
                }
            }
            Value::Map(json_to_map(json)?)
        }
    })
}

/// Converts a JSON object to a map of properties (no `$map` unescaping at the top).
///
/// # Errors
/// When `json` is not an object, or one of its values is malformed.
pub fn json_to_map(json: &Json) -> Result<Map, JsonError> {
    match json {
        Json::Object(obj) => obj
            .iter()
            .map(|(k, v)| Ok((k.clone(), from_json(v)?)))
            .collect(),
        other => Err(JsonError::new(format!(
            "expected a JSON object, found {}",
            json_type(other)
        ))),
    }
}

fn parse_float_tag(inner: &Json) -> Result<Value, JsonError> {
    match inner.as_str() {
        Some("NaN") => Ok(Value::Float(f64::NAN)),
        Some("inf") => Ok(Value::Float(f64::INFINITY)),
        Some("-inf") => Ok(Value::Float(f64::NEG_INFINITY)),
        _ => Err(JsonError::new(
            "\"$float\" must be \"NaN\", \"inf\" or \"-inf\"",
        )),
    }
}

fn parse_bytes_tag(inner: &Json) -> Result<Value, JsonError> {
    let text = inner
        .as_str()
        .ok_or_else(|| JsonError::new("\"$bytes\" must hold a base64 string"))?;
    B64.decode(text)
        .map(Value::Bytes)
        .map_err(|e| JsonError::new(format!("\"$bytes\" is not valid base64: {e}")))
}

fn parse_date_tag(inner: &Json) -> Result<Value, JsonError> {
    inner.as_i64().map(Value::Timestamp).ok_or_else(|| {
        JsonError::new("\"$date\" must hold integer milliseconds since the Unix epoch")
    })
}

fn json_type(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Renders a value as compact JSON text.
pub fn to_json_string(value: &Value) -> String {
    to_json(value).to_string()
}

/// A [`Value`] prints as tern's JSON (kept here, beside the printer it uses, so
/// that `value.rs` does not depend on this file).
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&to_json_string(self))
    }
}

/// Renders an entity as one JSON Lines record:
/// `{"kind": "...", "id": ..., "version": N, "value": {...}}`.
pub fn entity_to_json_line(entity: &Entity) -> String {
    format!(
        "{{\"kind\":{},\"id\":{},\"version\":{},\"value\":{}}}",
        Json::String(entity.key.kind.clone()),
        to_json(&entity.key.id),
        entity.version,
        map_to_json(&entity.value)
    )
}

/// Parses one JSON Lines record (see [`entity_to_json_line`]). `version` may be
/// omitted and then means 0.
///
/// # Errors
/// When the line is not JSON, or lacks `kind`, `id` or `value`, or a field has the wrong shape.
pub fn entity_from_json_line(line: &str) -> Result<Entity, JsonError> {
    let json = super::json_read::parse_strict(line)
        .map_err(|e| JsonError::new(format!("not valid JSON at {e}")))?;
    let obj = json.as_object().ok_or_else(|| {
        JsonError::new(format!(
            "expected a JSON object, found {}",
            json_type(&json)
        ))
    })?;
    for field in obj.keys() {
        if !matches!(field.as_str(), "kind" | "id" | "version" | "value") {
            return Err(JsonError::new(format!(
                "unknown field \"{field}\"; a record has \"kind\", \"id\", \"version\" and \"value\""
            )));
        }
    }
    let kind = obj
        .get("kind")
        .and_then(Json::as_str)
        .ok_or_else(|| JsonError::new("missing \"kind\" (a string)"))?;
    let id = from_json(
        obj.get("id")
            .ok_or_else(|| JsonError::new("missing \"id\""))?,
    )?;
    let version = match obj.get("version") {
        None => 0,
        Some(v) => v
            .as_u64()
            .ok_or_else(|| JsonError::new("\"version\" must be a non-negative integer"))?,
    };
    let value = json_to_map(
        obj.get("value")
            .ok_or_else(|| JsonError::new("missing \"value\" (an object)"))?,
    )?;
    if depth_of_map(&value) > super::codec::MAX_DEPTH {
        return Err(JsonError::new(format!(
            "\"value\" is nested deeper than {} arrays and maps, the most a store keeps",
            super::codec::MAX_DEPTH
        )));
    }
    let key = Key::new(kind, id).map_err(|e| JsonError::new(e.to_string()))?;
    Ok(Entity {
        key,
        version,
        value,
    })
}

/// The nesting of arrays and maps below the properties of `map` (a map of
/// scalars is 0), as the store's codec counts it.
pub(crate) fn depth_of_map(map: &Map) -> usize {
    nesting_depth(map.values())
}

/// The deepest nesting of arrays and maps in `values` (scalars only: 0),
/// without recursion.
pub(crate) fn nesting_depth<'a>(values: impl IntoIterator<Item = &'a Value>) -> usize {
    let mut deepest = 0;
    let mut todo: Vec<(&Value, usize)> = values.into_iter().map(|v| (v, 0)).collect();
    while let Some((v, depth)) = todo.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(depth + 1);
                todo.extend(items.iter().map(|i| (i, depth + 1)));
            }
            Value::Map(m) => {
                deepest = deepest.max(depth + 1);
                todo.extend(m.values().map(|i| (i, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::arb::arb_value;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn value_json_round_trips(v in arb_value()) {
            let text = to_json_string(&v);
            let back = from_json(&serde_json::from_str(&text).unwrap()).unwrap();
            prop_assert_eq!(back, v);
        }
    }

    #[test]
    fn tags_are_escaped_inside_maps() {
        let mut inner = Map::new();
        inner.insert("$bytes".into(), Value::String("not bytes".into()));
        let v = Value::Map(inner);
        let text = to_json_string(&v);
        assert_eq!(text, r#"{"$map":{"$bytes":"not bytes"}}"#);
        assert_eq!(from_json(&serde_json::from_str(&text).unwrap()).unwrap(), v);
    }

    #[test]
    fn floats_keep_their_fraction() {
        assert_eq!(to_json_string(&Value::Float(2.0)), "2.0");
        assert_eq!(
            from_json(&serde_json::json!(2.0)).unwrap(),
            Value::Float(2.0)
        );
        assert_eq!(from_json(&serde_json::json!(2)).unwrap(), Value::Int(2));
    }

    #[test]
    fn bad_tags_are_errors() {
        assert!(from_json(&serde_json::json!({"$bytes": 5})).is_err());
        assert!(from_json(&serde_json::json!({"$date": "x"})).is_err());
        assert!(from_json(&serde_json::json!(u64::MAX)).is_err());
    }

    #[test]
    fn entity_line_round_trips() {
        let line =
            r#"{"kind":"user","id":"1234","version":1,"value":{"name":"Gerhard","tags":["a",2]}}"#;
        let e = entity_from_json_line(line).unwrap();
        assert_eq!(e.version, 1);
        assert_eq!(entity_to_json_line(&e), line);
    }

    #[test]
    fn entity_line_errors_name_the_problem() {
        let err = entity_from_json_line(r#"{"kind":"user","value":{}}"#).unwrap_err();
        assert!(err.to_string().contains("missing \"id\""));
        let err =
            entity_from_json_line(r#"{"kind":"user","id":1,"value":{},"extra":1}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field"));
    }
}
