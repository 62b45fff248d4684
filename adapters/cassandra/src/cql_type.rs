//! CQL column types and the conversion of tern values to and from them (the native layout).
//!
//! Reading is driven by the column's type and is lossless for every supported type. Writing
//! converts a tern value to the column's type and refuses what would change it (an int out of
//! an `int`'s range, a float a `float` cannot hold exactly, a string in a `bigint`...). Text
//! columns registered as JSON columns hold any value as tern's lossless JSON.

use std::fmt;

use scylla::frame::response::result::{CollectionType, ColumnType, NativeType};
use scylla::value::{CqlTimestamp, CqlTimeuuid, CqlValue};
use tern_core::model::json::{from_json, to_json_string};
use tern_core::model::{Map, Value};

/// A CQL column type this adapter can map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CqlType {
    /// `ascii`
    Ascii,
    /// `text` (also `varchar`)
    Text,
    /// `boolean`
    Boolean,
    /// `bigint`
    BigInt,
    /// `int`
    Int,
    /// `smallint`
    SmallInt,
    /// `tinyint`
    TinyInt,
    /// `double`
    Double,
    /// `float`
    Float,
    /// `blob`
    Blob,
    /// `timestamp`
    Timestamp,
    /// `uuid`
    Uuid,
    /// `timeuuid`
    TimeUuid,
    /// `inet`
    Inet,
    /// `list<T>`
    List(Box<CqlType>),
    /// `set<T>`
    Set(Box<CqlType>),
    /// `map<K, V>`
    Map(Box<CqlType>, Box<CqlType>),
    /// `frozen<T>`
    Frozen(Box<CqlType>),
}

impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CqlType::Ascii => f.write_str("ascii"),
            CqlType::Text => f.write_str("text"),
            CqlType::Boolean => f.write_str("boolean"),
            CqlType::BigInt => f.write_str("bigint"),
            CqlType::Int => f.write_str("int"),
            CqlType::SmallInt => f.write_str("smallint"),
            CqlType::TinyInt => f.write_str("tinyint"),
            CqlType::Double => f.write_str("double"),
            CqlType::Float => f.write_str("float"),
            CqlType::Blob => f.write_str("blob"),
            CqlType::Timestamp => f.write_str("timestamp"),
            CqlType::Uuid => f.write_str("uuid"),
            CqlType::TimeUuid => f.write_str("timeuuid"),
            CqlType::Inet => f.write_str("inet"),
            CqlType::List(t) => write!(f, "list<{t}>"),
            CqlType::Set(t) => write!(f, "set<{t}>"),
            CqlType::Map(k, v) => write!(f, "map<{k}, {v}>"),
            CqlType::Frozen(t) => write!(f, "frozen<{t}>"),
        }
    }
}

impl CqlType {
    /// The type of a column, from the driver's type of it (the result metadata of a prepared
    /// `SELECT` of the column) and the column's `system_schema.columns.type` text (`text`:
    /// the server's spelling). The result metadata never says whether a collection is frozen
    /// (the driver documents its `frozen` flags as always `false` there), so that comes from
    /// the text's `frozen<` for the column itself; a collection inside a collection is always
    /// frozen (CQL allows no other).
    ///
    /// # Errors
    /// A message naming the type (as `text`) when it is not one this adapter maps (counter,
    /// decimal, varint, date, time, duration, tuples, user-defined types, vectors, maps
    /// without text keys...).
    pub(crate) fn from_driver(ty: &ColumnType<'_>, text: &str) -> Result<CqlType, String> {
        let mapped = CqlType::of_driver(ty).ok_or_else(|| {
            format!(
                "CQL type {text} is not supported by tern's native layout (supported: ascii, text, \
                 varchar, boolean, bigint, int, smallint, tinyint, double, float, blob, timestamp, \
                 uuid, timeuuid, inet, and list, set, map (text keys) and frozen of them)"
            )
        })?;
        Ok(if text.trim_start().starts_with("frozen<") {
            CqlType::Frozen(Box::new(mapped))
        } else {
            mapped
        })
    }

    /// The driver's type as tern's, nested collections frozen; `None` for a type tern does
    /// not map.
    fn of_driver(ty: &ColumnType<'_>) -> Option<CqlType> {
        let nested = |inner: &ColumnType<'_>| {
            CqlType::of_driver(inner).map(|t| match inner {
                ColumnType::Collection { .. } => Box::new(CqlType::Frozen(Box::new(t))),
                _ => Box::new(t),
            })
        };
        Some(match ty {
            ColumnType::Native(native) => match native {
                NativeType::Ascii => CqlType::Ascii,
                NativeType::Text => CqlType::Text,
                NativeType::Boolean => CqlType::Boolean,
                NativeType::BigInt => CqlType::BigInt,
                NativeType::Int => CqlType::Int,
                NativeType::SmallInt => CqlType::SmallInt,
                NativeType::TinyInt => CqlType::TinyInt,
                NativeType::Double => CqlType::Double,
                NativeType::Float => CqlType::Float,
                NativeType::Blob => CqlType::Blob,
                NativeType::Timestamp => CqlType::Timestamp,
                NativeType::Uuid => CqlType::Uuid,
                NativeType::Timeuuid => CqlType::TimeUuid,
                NativeType::Inet => CqlType::Inet,
                _ => return None,
            },
            ColumnType::Collection { typ, .. } => match typ {
                CollectionType::List(t) => CqlType::List(nested(t)?),
                CollectionType::Set(t) => CqlType::Set(nested(t)?),
                CollectionType::Map(k, v) => {
                    let key = nested(k)?;
                    if !key.is_text() {
                        return None;
                    }
                    CqlType::Map(key, nested(v)?)
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The type without `frozen<...>`.
    pub(crate) fn unfrozen(&self) -> &CqlType {
        match self {
            CqlType::Frozen(t) => t.unfrozen(),
            t => t,
        }
    }

    /// Whether a column of this type holds text (and so may be a JSON column).
    pub(crate) fn is_text(&self) -> bool {
        matches!(self.unfrozen(), CqlType::Text | CqlType::Ascii)
    }

    /// The column type tern gives a new column from a value it will hold (the literal of an
    /// `add`), and whether the column is a JSON column.
    ///
    /// Scalars get their natural type (`boolean`, `bigint`, `double`, `text`, `blob`,
    /// `timestamp`); a non-empty array of one scalar type a `list<T>`; a non-empty map whose
    /// values are of one scalar type a `map<text, T>`; any other nested value (empty,
    /// mixed, nested deeper, holding nulls) a JSON `text` column. `null` gives no type.
    pub(crate) fn for_value(value: &Value) -> Option<(CqlType, bool)> {
        if let Some(t) = scalar_type(value) {
            return Some((t, false));
        }
        let json = Some((CqlType::Text, true));
        match value {
            Value::Null => None,
            Value::Array(items) => match uniform_scalar(items.iter()) {
                Some(t) => Some((CqlType::List(Box::new(t)), false)),
                None => json,
            },
            Value::Map(map) => match uniform_scalar(map.values()) {
                Some(t) => Some((CqlType::Map(Box::new(CqlType::Text), Box::new(t)), false)),
                None => json,
            },
            _ => json,
        }
    }
}

fn scalar_type(value: &Value) -> Option<CqlType> {
    Some(match value {
        Value::Bool(_) => CqlType::Boolean,
        Value::Int(_) => CqlType::BigInt,
        Value::Float(_) => CqlType::Double,
        Value::String(_) => CqlType::Text,
        Value::Bytes(_) => CqlType::Blob,
        Value::Timestamp(_) => CqlType::Timestamp,
        Value::Null | Value::Array(_) | Value::Map(_) => return None,
    })
}

/// The scalar type shared by every value (at least one), if any.
fn uniform_scalar<'a>(mut values: impl Iterator<Item = &'a Value>) -> Option<CqlType> {
    let first = scalar_type(values.next()?)?;
    values
        .all(|v| scalar_type(v).as_ref() == Some(&first))
        .then_some(first)
}

/// Converts a tern value for a column of type `ty` (`json`: a JSON text column). `Null` is
/// `None` (an empty cell).
///
/// # Errors
/// A message saying why the value does not fit the type (the caller adds the place).
pub(crate) fn to_cql(value: &Value, ty: &CqlType, json: bool) -> Result<Option<CqlValue>, String> {
    if matches!(value, Value::Null) {
        return Ok(None);
    }
    if json && ty.is_text() {
        return Ok(Some(CqlValue::Text(to_json_string(value))));
    }
    to_cql_inner(value, ty).map(Some)
}

fn mismatch(value: &Value, ty: &CqlType) -> String {
    let what = match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) => "an int",
        Value::Float(_) => "a float",
        Value::String(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Timestamp(_) => "a timestamp",
        Value::Array(_) => "an array",
        Value::Map(_) => "a map",
    };
    format!("{what} cannot be stored in a {ty} column")
}

fn to_cql_inner(value: &Value, ty: &CqlType) -> Result<CqlValue, String> {
    let out_of_range = || format!("{value} is out of the range of a {ty} column");
    Ok(match (ty, value) {
        (CqlType::Frozen(inner), _) => to_cql_inner(value, inner)?,
        (CqlType::Text, Value::String(s)) => CqlValue::Text(s.clone()),
        (CqlType::Ascii, Value::String(s)) if s.is_ascii() => CqlValue::Ascii(s.clone()),
        (CqlType::Ascii, Value::String(_)) => {
            return Err("a non-ASCII string cannot be stored in an ascii column".to_owned());
        }
        (CqlType::Boolean, Value::Bool(b)) => CqlValue::Boolean(*b),
        (CqlType::BigInt, Value::Int(i)) => CqlValue::BigInt(*i),
        (CqlType::Int, Value::Int(i)) => {
            CqlValue::Int(i32::try_from(*i).map_err(|_| out_of_range())?)
        }
        (CqlType::SmallInt, Value::Int(i)) => {
            CqlValue::SmallInt(i16::try_from(*i).map_err(|_| out_of_range())?)
        }
        (CqlType::TinyInt, Value::Int(i)) => {
            CqlValue::TinyInt(i8::try_from(*i).map_err(|_| out_of_range())?)
        }
        (CqlType::Double, Value::Float(f)) => CqlValue::Double(*f),
        (CqlType::Float, Value::Float(f)) => {
            #[allow(clippy::cast_possible_truncation)]
            let narrow = *f as f32;
            if f64::from(narrow).to_bits() != f.to_bits() && !(f.is_nan() && narrow.is_nan()) {
                return Err(format!(
                    "{f} cannot be stored exactly in a float (32-bit) column"
                ));
            }
            CqlValue::Float(narrow)
        }
        (CqlType::Blob, Value::Bytes(b)) => CqlValue::Blob(b.clone()),
        (CqlType::Timestamp, Value::Timestamp(ms)) => CqlValue::Timestamp(CqlTimestamp(*ms)),
        (CqlType::Uuid | CqlType::TimeUuid, Value::String(s)) => {
            let parsed: CqlTimeuuid = s
                .parse()
                .map_err(|_| format!("{s:?} is not a UUID ({ty} column)"))?;
            if parsed.to_string() != *s {
                return Err(format!(
                    "{s:?} is not a UUID in canonical form (lowercase, hyphenated) for a {ty} column"
                ));
            }
            if *ty == CqlType::Uuid {
                CqlValue::Uuid(parsed.into())
            } else {
                CqlValue::Timeuuid(parsed)
            }
        }
        (CqlType::Inet, Value::String(s)) => {
            let ip: std::net::IpAddr = s
                .parse()
                .map_err(|_| format!("{s:?} is not an IP address (inet column)"))?;
            if ip.to_string() != *s {
                return Err(format!(
                    "{s:?} is not an IP address in canonical form (inet column)"
                ));
            }
            CqlValue::Inet(ip)
        }
        (CqlType::List(inner), Value::Array(items)) => CqlValue::List(
            items
                .iter()
                .map(|v| element(v, inner))
                .collect::<Result<_, _>>()?,
        ),
        (CqlType::Set(inner), Value::Array(items)) => {
            let elements: Vec<CqlValue> = items
                .iter()
                .map(|v| element(v, inner))
                .collect::<Result<_, _>>()?;
            let mut sorted = items.clone();
            sorted.sort();
            sorted.dedup();
            if sorted != *items {
                return Err(format!(
                    "an array that is not sorted without duplicates cannot be stored in a {ty} column \
                     (a set would reorder it)"
                ));
            }
            CqlValue::Set(elements)
        }
        (CqlType::Map(key, inner), Value::Map(map)) => CqlValue::Map(
            map.iter()
                .map(|(k, v)| {
                    Ok((
                        to_cql_inner(&Value::String(k.clone()), key)?,
                        element(v, inner)?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
        _ => return Err(mismatch(value, ty)),
    })
}

/// A collection element: never null in CQL.
fn element(value: &Value, ty: &CqlType) -> Result<CqlValue, String> {
    if matches!(value, Value::Null) {
        return Err("a collection column cannot hold null elements".to_owned());
    }
    to_cql_inner(value, ty)
}

/// Converts a stored CQL value (`json`: the column is a JSON text column).
///
/// # Errors
/// A message when the value cannot be a tern value (invalid JSON in a JSON column, a type
/// this adapter does not map).
pub(crate) fn from_cql(value: CqlValue, json: bool) -> Result<Value, String> {
    Ok(match value {
        CqlValue::Text(s) | CqlValue::Ascii(s) if json => {
            let parsed: serde_json::Value = serde_json::from_str(&s)
                .map_err(|e| format!("the JSON column holds invalid JSON ({e})"))?;
            from_json(&parsed).map_err(|e| format!("the JSON column holds {e}"))?
        }
        CqlValue::Text(s) | CqlValue::Ascii(s) => Value::String(s),
        CqlValue::Boolean(b) => Value::Bool(b),
        CqlValue::BigInt(i) => Value::Int(i),
        CqlValue::Int(i) => Value::Int(i64::from(i)),
        CqlValue::SmallInt(i) => Value::Int(i64::from(i)),
        CqlValue::TinyInt(i) => Value::Int(i64::from(i)),
        CqlValue::Double(f) => Value::Float(f),
        CqlValue::Float(f) => Value::Float(f64::from(f)),
        CqlValue::Blob(b) => Value::Bytes(b),
        CqlValue::Timestamp(ts) => Value::Timestamp(ts.0),
        CqlValue::Uuid(u) => Value::String(u.to_string()),
        CqlValue::Timeuuid(u) => Value::String(u.to_string()),
        CqlValue::Inet(ip) => Value::String(ip.to_string()),
        CqlValue::List(items) | CqlValue::Set(items) => Value::Array(
            items
                .into_iter()
                .map(|v| from_cql(v, false))
                .collect::<Result<_, _>>()?,
        ),
        CqlValue::Map(pairs) => {
            let mut map = Map::new();
            for (k, v) in pairs {
                let key = match k {
                    CqlValue::Text(s) | CqlValue::Ascii(s) => s,
                    other => return Err(format!("a map key {other:?} is not text")),
                };
                map.insert(key, from_cql(v, false)?);
            }
            Value::Map(map)
        }
        other => {
            return Err(format!(
                "the CQL value {other:?} has a type tern does not map"
            ));
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn arr(items: &[Value]) -> Value {
        Value::Array(items.to_vec())
    }

    fn native(t: NativeType) -> ColumnType<'static> {
        ColumnType::Native(t)
    }

    fn collection(typ: CollectionType<'static>) -> ColumnType<'static> {
        // As in result metadata: never marked frozen.
        ColumnType::Collection { frozen: false, typ }
    }

    fn list(t: CqlType) -> CqlType {
        CqlType::List(Box::new(t))
    }

    fn frozen(t: CqlType) -> CqlType {
        CqlType::Frozen(Box::new(t))
    }

    #[test]
    fn driver_types_map_and_print_as_the_schema_spells_them() {
        let text = || Box::new(native(NativeType::Text));
        let doubles = || {
            Box::new(collection(CollectionType::List(Box::new(native(
                NativeType::Double,
            )))))
        };
        for (ty, schema_text, shown) in [
            (native(NativeType::Text), "text", "text"),
            (native(NativeType::Text), "varchar", "text"),
            (native(NativeType::Boolean), "boolean", "boolean"),
            (native(NativeType::Timeuuid), "timeuuid", "timeuuid"),
            (
                collection(CollectionType::List(Box::new(native(NativeType::BigInt)))),
                "list<bigint>",
                "list<bigint>",
            ),
            (
                collection(CollectionType::Set(text())),
                "set<text>",
                "set<text>",
            ),
            (
                collection(CollectionType::Map(
                    text(),
                    Box::new(native(NativeType::Int)),
                )),
                "map<text, int>",
                "map<text, int>",
            ),
            // Frozen: the column itself from the schema's text, nested collections always.
            (
                collection(CollectionType::Map(text(), doubles())),
                "frozen<map<text, frozen<list<double>>>>",
                "frozen<map<text, frozen<list<double>>>>",
            ),
            (
                collection(CollectionType::List(doubles())),
                "list<frozen<list<double>>>",
                "list<frozen<list<double>>>",
            ),
        ] {
            assert_eq!(
                CqlType::from_driver(&ty, schema_text).unwrap().to_string(),
                shown,
                "{schema_text}"
            );
        }
        for (ty, schema_text) in [
            (native(NativeType::Counter), "counter"),
            (native(NativeType::Decimal), "decimal"),
            (native(NativeType::Varint), "varint"),
            (native(NativeType::Date), "date"),
            (
                collection(CollectionType::Map(
                    Box::new(native(NativeType::Int)),
                    text(),
                )),
                "map<int, text>",
            ),
            (
                collection(CollectionType::List(Box::new(native(NativeType::Duration)))),
                "list<duration>",
            ),
            (
                ColumnType::Tuple(vec![native(NativeType::Int), native(NativeType::Int)]),
                "frozen<tuple<int, int>>",
            ),
            (
                ColumnType::Vector {
                    typ: Box::new(native(NativeType::Float)),
                    dimensions: 3,
                },
                "vector<float, 3>",
            ),
        ] {
            let err = CqlType::from_driver(&ty, schema_text).unwrap_err();
            assert!(
                err.contains(&format!("CQL type {schema_text} is not supported")),
                "{schema_text}: {err}"
            );
        }
    }

    #[test]
    fn the_type_of_a_new_column_comes_from_the_literal() {
        let t = |v: Value| CqlType::for_value(&v).map(|(t, json)| (t.to_string(), json));
        assert_eq!(t(Value::Int(0)), Some(("bigint".into(), false)));
        assert_eq!(t(Value::Float(0.5)), Some(("double".into(), false)));
        assert_eq!(t(Value::from("x")), Some(("text".into(), false)));
        assert_eq!(t(Value::Bool(true)), Some(("boolean".into(), false)));
        assert_eq!(t(Value::Bytes(vec![1])), Some(("blob".into(), false)));
        assert_eq!(t(Value::Timestamp(5)), Some(("timestamp".into(), false)));
        assert_eq!(t(Value::Null), None);
        assert_eq!(
            t(arr(&[Value::Int(1), Value::Int(2)])),
            Some(("list<bigint>".into(), false))
        );
        let mut m = Map::new();
        m.insert("a".into(), Value::from("x"));
        assert_eq!(
            t(Value::Map(m.clone())),
            Some(("map<text, text>".into(), false))
        );
        // Anything a collection cannot hold exactly is JSON text.
        m.insert("b".into(), Value::Int(1));
        assert_eq!(t(Value::Map(m)), Some(("text".into(), true)));
        assert_eq!(t(arr(&[])), Some(("text".into(), true)));
        assert_eq!(
            t(arr(&[Value::Int(1), Value::Null])),
            Some(("text".into(), true))
        );
        assert_eq!(
            t(arr(&[arr(&[Value::Int(1)])])),
            Some(("text".into(), true))
        );
        assert_eq!(
            t(arr(&[Value::Int(1), Value::Float(1.0)])),
            Some(("text".into(), true))
        );
    }

    #[test]
    fn values_round_trip_through_their_column_types() {
        let mut m = Map::new();
        m.insert("k".into(), Value::Int(-3));
        let cases = [
            (Value::from("é'\""), CqlType::Text),
            (Value::from("abc"), CqlType::Ascii),
            (Value::Bool(false), CqlType::Boolean),
            (Value::Int(i64::MIN), CqlType::BigInt),
            (Value::Int(-2_147_483_648), CqlType::Int),
            (Value::Int(32767), CqlType::SmallInt),
            (Value::Int(-128), CqlType::TinyInt),
            (Value::Float(-0.0), CqlType::Double),
            (
                Value::Float(f64::from_bits(0x7ff8_0000_0000_0001)),
                CqlType::Double,
            ),
            (Value::Float(0.5), CqlType::Float),
            (Value::Bytes(vec![0, 255]), CqlType::Blob),
            (Value::Timestamp(-1), CqlType::Timestamp),
            (
                Value::from("123e4567-e89b-12d3-a456-426614174000"),
                CqlType::Uuid,
            ),
            (Value::from("::1"), CqlType::Inet),
            (
                arr(&[Value::Int(2), Value::Int(1), Value::Int(2)]),
                list(CqlType::BigInt),
            ),
            (
                arr(&[Value::from("a"), Value::from("b")]),
                CqlType::Set(Box::new(CqlType::Text)),
            ),
            (
                Value::Map(m),
                frozen(CqlType::Map(
                    Box::new(CqlType::Text),
                    Box::new(CqlType::Int),
                )),
            ),
        ];
        for (value, ty) in cases {
            let cql = to_cql(&value, &ty, false).unwrap().unwrap();
            let back = from_cql(cql, false).unwrap();
            assert_eq!(back, value, "{ty}");
            if let Value::Float(f) = (&back, &value).0 {
                assert_eq!(
                    f.to_bits(),
                    match &value {
                        Value::Float(g) => g.to_bits(),
                        _ => 0,
                    }
                );
            }
        }
        // JSON columns hold anything, exactly.
        let mut nested = Map::new();
        nested.insert("$date".into(), Value::Int(5));
        nested.insert("bytes".into(), Value::Bytes(vec![1]));
        let value = arr(&[Value::Null, Value::Map(nested), Value::Float(1.0)]);
        let cql = to_cql(&value, &CqlType::Text, true).unwrap().unwrap();
        assert_eq!(from_cql(cql, true).unwrap(), value);
        assert_eq!(to_cql(&Value::Null, &CqlType::BigInt, false).unwrap(), None);
    }

    #[test]
    fn values_that_a_column_would_change_are_refused() {
        let refused = |value: Value, ty: CqlType| to_cql(&value, &ty, false).unwrap_err();
        assert!(
            refused(Value::from("1"), CqlType::BigInt)
                .contains("a string cannot be stored in a bigint column")
        );
        assert!(refused(Value::Int(1), CqlType::Double).contains("an int cannot"));
        assert!(refused(Value::Int(1 << 40), CqlType::Int).contains("out of the range"));
        assert!(refused(Value::Float(0.1), CqlType::Float).contains("exactly"));
        assert!(refused(Value::from("é"), CqlType::Ascii).contains("non-ASCII"));
        assert!(refused(Value::from("not-a-uuid"), CqlType::Uuid).contains("not a UUID"));
        assert!(
            refused(
                Value::from("123E4567-E89B-12D3-A456-426614174000"),
                CqlType::Uuid
            )
            .contains("canonical")
        );
        assert!(
            refused(arr(&[Value::Int(1), Value::Null]), list(CqlType::BigInt))
                .contains("null elements")
        );
        assert!(
            refused(
                arr(&[Value::from("b"), Value::from("a")]),
                CqlType::Set(Box::new(CqlType::Text))
            )
            .contains("reorder")
        );
        assert!(refused(Value::Map(Map::new()), list(CqlType::BigInt)).contains("a map cannot"));
    }
}
