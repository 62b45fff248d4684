//! Values as JSON: tern's typed JSON ([`tern_core::model::json`]) with this
//! adapter's one extra tag, used by a hash field's encoding (`codec.rs`) and by a
//! JSON-string entity (`typed_json.rs`).

use serde_json::Value as Json;
use tern_core::model::json::{from_json, to_json};
use tern_core::model::{Map, Value};

/// tern's typed JSON ([`tern_core::model::json`]), plus one tag of this
/// adapter: a NaN other than the canonical one keeps its bits as
/// `{"$float": "NaN:<16 hex digits>"}`, so every float survives bit for bit.
pub(crate) fn value_to_json(value: &Value) -> Json {
    match value {
        Value::Float(f) if f.is_nan() && f.to_bits() != f64::NAN.to_bits() => {
            let mut obj = serde_json::Map::new();
            obj.insert(
                "$float".to_owned(),
                Json::String(format!("NaN:{:016x}", f.to_bits())),
            );
            Json::Object(obj)
        }
        Value::Array(items) => Json::Array(items.iter().map(value_to_json).collect()),
        Value::Map(map) => {
            let obj = map_to_object(map);
            if needs_map_tag(map) {
                let mut tagged = serde_json::Map::new();
                tagged.insert("$map".to_owned(), obj);
                Json::Object(tagged)
            } else {
                obj
            }
        }
        other => to_json(other),
    }
}

const TAGS: [&str; 4] = ["$float", "$bytes", "$date", "$map"];

/// Whether a map is written inside a `$map` tag: its one key is a tag's.
pub(crate) fn needs_map_tag(map: &Map) -> bool {
    map.len() == 1 && map.keys().all(|k| TAGS.contains(&k.as_str()))
}

/// A map as a JSON object (no `$map` tag at this level).
pub(crate) fn map_to_object(map: &Map) -> Json {
    Json::Object(
        map.iter()
            .map(|(k, v)| (k.clone(), value_to_json(v)))
            .collect(),
    )
}

/// The inverse of [`value_to_json`].
pub(crate) fn value_from_json(json: &Json) -> std::result::Result<Value, String> {
    match json {
        Json::Array(items) => items
            .iter()
            .map(value_from_json)
            .collect::<std::result::Result<_, _>>()
            .map(Value::Array),
        Json::Object(obj) => {
            if obj.len() == 1
                && let Some((tag, inner)) = obj.iter().next()
            {
                match (tag.as_str(), inner) {
                    ("$float", Json::String(text)) if text.starts_with("NaN:") => {
                        return u64::from_str_radix(&text[4..], 16)
                            .map(|bits| Value::Float(f64::from_bits(bits)))
                            .map_err(|e| format!("bad NaN payload {text:?}: {e}"));
                    }
                    ("$map", Json::Object(_)) => return object_to_map(inner).map(Value::Map),
                    ("$float" | "$bytes" | "$date" | "$map", _) => {
                        return from_json(json).map_err(|e| e.to_string());
                    }
                    _ => {}
                }
            }
            object_to_map(json).map(Value::Map)
        }
        other => from_json(other).map_err(|e| e.to_string()),
    }
}

/// A JSON object as a map (no `$map` tag at this level).
pub(crate) fn object_to_map(json: &Json) -> std::result::Result<Map, String> {
    match json {
        Json::Object(obj) => obj
            .iter()
            .map(|(k, v)| Ok((k.clone(), value_from_json(v)?)))
            .collect(),
        _ => Err("expected a JSON object".to_owned()),
    }
}
