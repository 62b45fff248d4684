//! Reads a JSON-string entity straight into tern's values in one pass, and
//! writes one straight from them: no `serde_json::Value` tree built and then
//! converted, so each string is allocated once (read) or not at all (written).
//! A tagged value (an object whose only key starts with `$`: `{"$float":
//! ...}`, `{"$map": ...}`...) is read as JSON and given to the general
//! conversion ([`json_value::value_from_json`]), so every value reads as that
//! conversion reads it; the writer writes the general conversion's JSON
//! ([`json_value::value_to_json`]), properties in sorted order (tested byte for byte).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value as Json;
use tern_core::model::{Map, Value, Version};

use crate::json_value;

/// The version (the `version_field` property, 0 without it) and the other
/// properties of the JSON object `text`. Its top level is a map of
/// properties, never a tagged value.
///
/// # Errors
/// What is wrong, with serde_json's line and column for text that is not JSON.
pub(crate) fn read_entity(text: &str, version_field: &str) -> Result<(Version, Map), String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let read = EntitySeed { version_field }
        .deserialize(&mut de)
        .map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(read)
}

/// The JSON text of an entity's properties with its version as the
/// `version_field` property (the caller checks that no property has that
/// name), in sorted order: [`json_value::map_to_object`] with the version
/// inserted, then serialized, without the tree.
pub(crate) fn write_entity(map: &Map, version_field: &str, version: Version) -> String {
    let entity = TypedEntity {
        map,
        version_field,
        version,
    };
    // Serializing to a String cannot fail: no map key is anything but a string.
    serde_json::to_string(&entity).unwrap_or_default()
}

/// An entity's properties and version, serialized as one JSON object.
struct TypedEntity<'a> {
    map: &'a Map,
    version_field: &'a str,
    version: Version,
}

impl serde::Serialize for TypedEntity<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut out = s.serialize_map(Some(self.map.len() + 1))?;
        // The keys in order, as serde_json's (sorted) map writes them.
        let mut version = Some(self.version);
        for (name, value) in self.map {
            if version.is_some() && self.version_field < name.as_str() {
                out.serialize_entry(self.version_field, &self.version)?;
                version = None;
            }
            out.serialize_entry(name, &Typed(value))?;
        }
        if let Some(v) = version {
            out.serialize_entry(self.version_field, &v)?;
        }
        out.end()
    }
}

/// A value serialized as [`json_value::value_to_json`] converts it.
struct Typed<'a>(&'a Value);

impl serde::Serialize for Typed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) if f.is_finite() => s.serialize_f64(*f),
            Value::String(text) => s.serialize_str(text),
            Value::Array(items) => {
                let mut out = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Typed(item))?;
                }
                out.end()
            }
            Value::Map(map) if !json_value::needs_map_tag(map) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                for (name, value) in map {
                    out.serialize_entry(name, &Typed(value))?;
                }
                out.end()
            }
            // Tagged values (non-finite floats, bytes, dates, a map that
            // looks like a tag): rare, written through the general conversion.
            other => json_value::value_to_json(other).serialize(s),
        }
    }
}

/// The top level: properties and the version field.
struct EntitySeed<'a> {
    version_field: &'a str,
}

impl<'de> DeserializeSeed<'de> for EntitySeed<'_> {
    type Value = (Version, Map);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EntitySeed<'_> {
    type Value = (Version, Map);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut version = 0;
        let mut map = Map::new();
        while let Some(name) = m.next_key::<String>()? {
            if name == self.version_field {
                let v: Json = m.next_value()?;
                version = v.as_u64().ok_or_else(|| {
                    de::Error::custom("the version field is not a non-negative integer")
                })?;
            } else {
                let v = m.next_value_seed(ValueSeed)?;
                map.insert(name, v);
            }
        }
        Ok((version, map))
    }
}

/// One value below the top level.
struct ValueSeed;

/// A scalar through the general conversion (integers beyond 64 bits refused as there).
fn scalar<E: de::Error>(json: Json) -> Result<Value, E> {
    json_value::value_from_json(&json).map_err(E::custom)
}

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        scalar(Json::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        scalar(Json::from(n))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        scalar(Json::from(n))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(s.size_hint().unwrap_or(0));
        while let Some(v) = s.next_element_seed(ValueSeed)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        let Some(first) = m.next_key::<String>()? else {
            return Ok(Value::Map(map));
        };
        if first.starts_with('$') {
            // Maybe a tag: it is one only if no other key follows.
            let inner: Json = m.next_value()?;
            let Some(second) = m.next_key::<String>()? else {
                let tagged = Json::Object([(first, inner)].into_iter().collect());
                return json_value::value_from_json(&tagged).map_err(de::Error::custom);
            };
            map.insert(
                first,
                json_value::value_from_json(&inner).map_err(de::Error::custom)?,
            );
            let v = m.next_value_seed(ValueSeed)?;
            map.insert(second, v);
        } else {
            let v = m.next_value_seed(ValueSeed)?;
            map.insert(first, v);
        }
        while let Some(name) = m.next_key::<String>()? {
            let v = m.next_value_seed(ValueSeed)?;
            map.insert(name, v);
        }
        Ok(Value::Map(map))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The two-pass reading this module replaces: a JSON tree, then the
    /// general conversion (the reference).
    fn two_pass(text: &str, vf: &str) -> Result<(Version, Map), ()> {
        let mut json: Json = serde_json::from_str(text).map_err(|_| ())?;
        let Json::Object(obj) = &mut json else {
            return Err(());
        };
        let version = match obj.remove(vf) {
            None => 0,
            Some(v) => v.as_u64().ok_or(())?,
        };
        Ok((version, json_value::object_to_map(&json).map_err(|_| ())?))
    }

    #[test]
    fn reads_as_the_two_pass_conversion() {
        for text in [
            r#"{}"#,
            r#"{"_v":3,"a":[1,2.5,"s",null,true,{},[]]}"#,
            r#"{"a":{"$float":"NaN:7ff8000000000001"}}"#,
            r#"{"a":{"$float":"inf"}}"#,
            r#"{"a":{"$float":5}}"#,
            r#"{"a":{"$bytes":"AQI="}}"#,
            r#"{"a":{"$date":12}}"#,
            r#"{"a":{"$map":{"$float":1}}}"#,
            r#"{"a":{"$map":3}}"#,
            r#"{"a":{"$foo":1}}"#,
            r#"{"a":{"$x":1,"y":{"$float":"-0"}}}"#,
            r#"{"a":{"y":1,"$float":2}}"#,
            r#"{"a":18446744073709551615}"#,
            r#"{"a":-9223372036854775808,"b":1e300}"#,
            r#"{"a":1,"a":2,"_v":1,"_v":4}"#,
            r#"{"_v":-1}"#,
            r#"{"_v":"1"}"#,
            r#"[1]"#,
            r#"{"a":1} x"#,
            r#"{"a":"\u00e9\n"}"#,
        ] {
            let got = read_entity(text, "_v").map_err(|_| ());
            assert_eq!(got, two_pass(text, "_v"), "{text}");
        }
    }

    proptest::proptest! {
        /// The writer writes the general conversion's JSON, its properties
        /// in sorted order, byte for byte, wherever the version field falls
        /// among them. (The tree's own text puts the version last when a
        /// crate of the build turns on serde_json's `preserve_order`; the
        /// expected text is written from a sorted map so that it does not
        /// depend on the build.)
        #[test]
        fn writes_what_the_general_conversion_writes(
            map in tern_core::model::arb::arb_map(),
            version in 0u64..1000,
            vf in "[_a-z]{1,3}",
        ) {
            proptest::prop_assume!(!map.contains_key(&vf));
            let Json::Object(obj) = json_value::map_to_object(&map) else {
                panic!("a map is written as an object");
            };
            let mut sorted: std::collections::BTreeMap<String, Json> = obj.into_iter().collect();
            sorted.insert(vf.clone(), Json::from(version));
            let want = serde_json::to_string(&sorted).unwrap();
            proptest::prop_assert_eq!(write_entity(&map, &vf, version), want);
        }

        /// Any map of values, written as tern writes it, reads back through
        /// both readings alike.
        #[test]
        fn reads_what_tern_writes(map in tern_core::model::arb::arb_map()) {
            proptest::prop_assume!(!map.contains_key("_v"));
            let text = json_value::map_to_object(&map).to_string();
            let got = read_entity(&text, "_v").map_err(|_| ());
            proptest::prop_assert_eq!(&got, &two_pass(&text, "_v"));
            proptest::prop_assert_eq!(got, Ok((0, map)));
        }
    }
}
