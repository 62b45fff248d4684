//! Mapping between tern values and BSON, and the escape of property names.

use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{self, Bson, Document, oid::ObjectId};
use tern_core::model::{Entity, Key, Map, Value, Version};
use tern_core::store::{Error, ErrorKind, Result};

/// The field that holds an array id (MongoDB refuses arrays as `_id`).
/// `%` followed by a non-hex letter is never produced by [`escape_name`].
pub(crate) const ARRAY_ID_FIELD: &str = "%arr";

/// The field of the wrapper document that holds a timestamp outside years 1-9999.
pub(crate) const WIDE_DATE_FIELD: &str = "%date";

/// 0001-01-01T00:00:00Z in milliseconds since the epoch.
pub(crate) const MIN_DATE_MS: i64 = -62_135_596_800_000;

/// 9999-12-31T23:59:59.999Z in milliseconds since the epoch.
pub(crate) const MAX_DATE_MS: i64 = 253_402_300_799_999;

/// The field that holds an entity's version.
pub(crate) const VERSION_FIELD: &str = "_v";

/// A property name as a BSON field name: reversible, and never containing NUL,
/// empty, or equal to `_id` / `_v`.
///
/// `%` is the escape character: `%` and NUL become `%25` and `%00`; `_id` and
/// `_v` become `%5Fid` and `%5Fv`; the empty name becomes `%`. Every other
/// name is stored as it is, dotted and `$`-prefixed names too (legal since
/// MongoDB 5.0; tern wrote them escaped before 2026-11-29, as
/// [`legacy_field_name`] does, and still reads that form: see docs.md).
pub(crate) fn escape_name(name: &str) -> String {
    escape_with(name, false)
}

/// The form tern wrote a property name in before 2026-11-29, when `.` and a
/// leading `$` were escaped too (`%2E`, `%24`); `None` when it is the form of
/// [`escape_name`] (the name has neither).
pub(crate) fn legacy_field_name(name: &str) -> Option<String> {
    has_two_forms(name).then(|| escape_with(name, true))
}

/// Is a property stored under one of two field names ([`escape_name`] and
/// [`legacy_field_name`]): a dotted or `$`-prefixed name? Such a field is
/// no plain path in a query (`a.b` is the nested `b`, `$x` an operator), so it
/// is addressed with `$getField`, in both forms, or not in the server at all.
pub(crate) fn has_two_forms(name: &str) -> bool {
    name.starts_with('$') || name.contains('.')
}

/// The other field name a stored field `field` may have for the same
/// property (its legacy form, [`legacy_field_name`]), for a field in the form
/// of [`escape_name`]; `None` when it has one form only.
pub(crate) fn legacy_of_field(field: &str) -> Option<String> {
    legacy_field_name(&unescape_any(field)?)
}

fn escape_with(name: &str, legacy: bool) -> String {
    if name.is_empty() {
        return "%".to_owned();
    }
    if name == "_id" || name == VERSION_FIELD {
        return format!("%5F{}", &name[1..]);
    }
    let special = |i: usize, c: char| match c {
        '%' | '\0' => true,
        '.' => legacy,
        '$' => legacy && i == 0,
        _ => false,
    };
    if !name.chars().enumerate().any(|(i, c)| special(i, c)) {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        match c {
            c if !special(i, c) => out.push(c),
            '$' => out.push_str("%24"),
            '%' => out.push_str("%25"),
            '.' => out.push_str("%2E"),
            _ => out.push_str("%00"),
        }
    }
    out
}

/// The inverse of [`escape_name`] and of [`legacy_field_name`]; `None` for a
/// name neither can have produced (`progress%`, and also `a%41` or `a%2e`,
/// which another program may write: read as `aA` or `a.b`, they would be
/// written back under another name, so they are refused with the field named
/// rather than renamed).
pub(crate) fn unescape_name(field: &str) -> Option<String> {
    let name = unescape_any(field)?;
    (escape_name(&name) == field || legacy_field_name(&name).is_some_and(|l| l == field))
        .then_some(name)
}

fn unescape_any(field: &str) -> Option<String> {
    if field == "%" {
        return Some(String::new());
    }
    if !field.contains('%') {
        return Some(field.to_owned());
    }
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = field.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A tern value as BSON.
pub(crate) fn to_bson(value: &Value) -> Bson {
    match value {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Int(i) => Bson::Int64(*i),
        Value::Float(f) => Bson::Double(*f),
        Value::String(s) => Bson::String(s.clone()),
        Value::Bytes(b) => Bson::Binary(bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: b.clone(),
        }),
        Value::Timestamp(ms) if (MIN_DATE_MS..=MAX_DATE_MS).contains(ms) => {
            Bson::DateTime(bson::DateTime::from_millis(*ms))
        }
        Value::Timestamp(ms) => {
            let mut doc = Document::new();
            doc.insert(WIDE_DATE_FIELD, Bson::Int64(*ms));
            Bson::Document(doc)
        }
        Value::Array(items) => Bson::Array(items.iter().map(to_bson).collect()),
        Value::Map(map) => {
            tagged_to_bson(map).unwrap_or_else(|| Bson::Document(map_to_document(map)))
        }
    }
}

/// The BSON value a tagged map stands for (`{"$oid": hex}`, `{"$numberDecimal": s}`...),
/// when it is exactly what [`from_bson`] makes of that value; `None` for a plain map.
fn tagged_to_bson(map: &Map) -> Option<Bson> {
    let mut it = map.iter();
    let (tag, inner) = it.next()?;
    if !tag.starts_with('$') {
        return None;
    }
    let str_of = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        _ => None,
    };
    let bson = match (map.len(), tag.as_str()) {
        (1, "$oid") => Bson::ObjectId(ObjectId::parse_str(str_of(inner)?).ok()?),
        (1, "$numberDecimal") => Bson::Decimal128(str_of(inner)?.parse::<bson::Decimal128>().ok()?),
        (1, "$symbol") => Bson::Symbol(str_of(inner)?),
        (1, "$code") => Bson::JavaScriptCode(str_of(inner)?),
        (1, "$minKey") if *inner == Value::Int(1) => Bson::MinKey,
        (1, "$maxKey") if *inner == Value::Int(1) => Bson::MaxKey,
        (1, "$timestamp") => {
            let Value::Map(m) = inner else { return None };
            let t = match m.get("t")? {
                Value::Int(t) => u32::try_from(*t).ok()?,
                _ => return None,
            };
            let i = match m.get("i")? {
                Value::Int(i) => u32::try_from(*i).ok()?,
                _ => return None,
            };
            if m.len() != 2 {
                return None;
            }
            Bson::Timestamp(bson::Timestamp {
                time: t,
                increment: i,
            })
        }
        (1, "$regularExpression") => {
            let Value::Map(m) = inner else { return None };
            if m.len() != 2 {
                return None;
            }
            Bson::RegularExpression(bson::Regex {
                pattern: str_of(m.get("pattern")?)?,
                options: str_of(m.get("options")?)?,
            })
        }
        (2, "$binary") => {
            let Value::Bytes(bytes) = inner else {
                return None;
            };
            let sub = match map.get("$subtype")? {
                Value::Int(n) => u8::try_from(*n).ok()?,
                _ => return None,
            };
            let subtype = BinarySubtype::from(sub);
            if subtype == BinarySubtype::Generic {
                return None;
            }
            Bson::Binary(bson::Binary {
                subtype,
                bytes: bytes.clone(),
            })
        }
        (2, "$code") => {
            let Value::Map(scope) = map.get("$scope")? else {
                return None;
            };
            Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                code: str_of(inner)?,
                scope: map_to_document(scope),
            })
        }
        _ => return None,
    };
    // Only when reading it back gives exactly this map (canonical forms only).
    match from_bson(&bson) {
        Ok(Value::Map(back)) if back == *map => Some(bson),
        _ => None,
    }
}

/// A tern map as a BSON document (names escaped).
pub(crate) fn map_to_document(map: &Map) -> Document {
    let mut doc = Document::new();
    for (k, v) in map {
        doc.insert(escape_name(k), to_bson(v));
    }
    doc
}

fn invalid(what: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidData, what)
}

fn tagged(tag: &str, value: Value) -> Value {
    let mut m = Map::new();
    m.insert(tag.to_owned(), value);
    Value::Map(m)
}

/// A BSON value as a tern value. Types without a tern counterpart become
/// tagged maps (see docs.md).
pub(crate) fn from_bson(value: &Bson) -> Result<Value> {
    Ok(match value {
        Bson::Null | Bson::Undefined => Value::Null,
        Bson::Boolean(b) => Value::Bool(*b),
        Bson::Int32(i) => Value::Int(i64::from(*i)),
        Bson::Int64(i) => Value::Int(*i),
        Bson::Double(f) => Value::Float(*f),
        Bson::String(s) => Value::String(s.clone()),
        Bson::Binary(b) => match b.subtype {
            BinarySubtype::Generic => Value::Bytes(b.bytes.clone()),
            other => {
                let mut m = Map::new();
                m.insert("$binary".to_owned(), Value::Bytes(b.bytes.clone()));
                m.insert(
                    "$subtype".to_owned(),
                    Value::Int(i64::from(u8::from(other))),
                );
                Value::Map(m)
            }
        },
        Bson::DateTime(d) => Value::Timestamp(d.timestamp_millis()),
        Bson::Array(items) => Value::Array(items.iter().map(from_bson).collect::<Result<_>>()?),
        Bson::Document(doc) => match (doc.len(), doc.get(WIDE_DATE_FIELD)) {
            (1, Some(Bson::Int64(ms))) => Value::Timestamp(*ms),
            _ => plain_map(document_to_map(doc)?)?,
        },
        Bson::ObjectId(oid) => tagged("$oid", Value::String(oid.to_hex())),
        Bson::Decimal128(d) => tagged("$numberDecimal", Value::String(d.to_string())),
        Bson::Timestamp(ts) => {
            let mut m = Map::new();
            m.insert("t".to_owned(), Value::Int(i64::from(ts.time)));
            m.insert("i".to_owned(), Value::Int(i64::from(ts.increment)));
            tagged("$timestamp", Value::Map(m))
        }
        Bson::RegularExpression(r) => {
            let mut m = Map::new();
            m.insert("pattern".to_owned(), Value::String(r.pattern.clone()));
            m.insert("options".to_owned(), Value::String(r.options.clone()));
            tagged("$regularExpression", Value::Map(m))
        }
        Bson::JavaScriptCode(c) => tagged("$code", Value::String(c.clone())),
        Bson::JavaScriptCodeWithScope(c) => {
            let mut m = Map::new();
            m.insert("$code".to_owned(), Value::String(c.code.clone()));
            m.insert("$scope".to_owned(), Value::Map(document_to_map(&c.scope)?));
            Value::Map(m)
        }
        Bson::Symbol(s) => tagged("$symbol", Value::String(s.clone())),
        Bson::MinKey => tagged("$minKey", Value::Int(1)),
        Bson::MaxKey => tagged("$maxKey", Value::Int(1)),
        Bson::DbPointer(_) => return Err(invalid("a DBPointer value cannot be read by tern")),
    })
}

/// A document read as a map, refused when the map reads as a tag
/// (`{"$oid": "<24 hex>"}` as a plain document another program wrote): tern
/// would write it back as the BSON type it stands for.
fn plain_map(map: Map) -> Result<Value> {
    if tagged_to_bson(&map).is_some() {
        let first = map.keys().next().cloned().unwrap_or_default();
        return Err(invalid(format!(
            "a plain document with field {first:?} that reads as tern's tag for a BSON type \
             (see the values table of the mongodb adapter's docs): tern would write it back as that \
             type; rename the field in the collection, or keep tern away from this kind"
        )));
    }
    Ok(Value::Map(map))
}

/// The aggregation `$type` names of the BSON types tern reads as the type of
/// `lit` (a value as [`to_bson`] writes it): an int may be stored as an
/// `Int32` (as many drivers write small integers) or an `Int64` (as tern
/// writes it), a null as a null or the deprecated `undefined`; every other
/// type only as itself.
pub(crate) fn types_read_alike(lit: &Bson) -> Vec<&'static str> {
    match lit {
        Bson::Int32(_) | Bson::Int64(_) => vec!["int", "long"],
        Bson::Null | Bson::Undefined => vec!["null", "undefined"],
        other => vec![type_name(other)],
    }
}

/// The aggregation `$type` name of a BSON value as tern writes it.
pub(crate) fn type_name(b: &Bson) -> &'static str {
    match b {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}

/// A BSON document as a tern map (names unescaped).
pub(crate) fn document_to_map(doc: &Document) -> Result<Map> {
    let mut map = Map::new();
    for (k, v) in doc {
        insert_field(&mut map, doc, k, v)?;
    }
    Ok(map)
}

/// Adds stored field `field` of `doc` to `map` under its property name.
/// Refused: a name tern cannot read ([`foreign_name_message`]), and a
/// property held twice (`a.b` and `a%2Eb`, the legacy form).
fn insert_field(map: &mut Map, doc: &Document, field: &str, value: &Bson) -> Result<()> {
    let name = unescape_name(field).ok_or_else(|| invalid(foreign_name_message(field)))?;
    if map.contains_key(&name) {
        let other = [
            escape_name(&name),
            legacy_field_name(&name).unwrap_or_default(),
        ]
        .into_iter()
        .find(|f| f != field && doc.contains_key(f))
        .unwrap_or_default();
        return Err(invalid(format!(
            "fields {other:?} and {field:?} both hold property {name:?} (the second is the form \
             tern wrote before 2026-11-29, the first the literal name): remove one of them"
        )));
    }
    map.insert(name, from_bson(value)?);
    Ok(())
}

/// Why a field name another program wrote is refused, and what to do.
///
/// Dotted and `$`-prefixed names (legal since MongoDB 5.0) are read as they
/// are (issue 34 item 12); a `%` that starts no escape tern writes is not.
fn foreign_name_message(field: &str) -> String {
    format!(
        "field name {field:?} is not a name tern writes (`%` starts an escape, as in `%25`): \
         rename the field in the collection, or keep tern away from this kind"
    )
}

/// An entity id as a BSON `_id`.
pub(crate) fn id_to_bson(id: &Value) -> Bson {
    match id {
        Value::Array(items) => {
            let mut doc = Document::new();
            doc.insert(
                ARRAY_ID_FIELD,
                Bson::Array(items.iter().map(id_to_bson).collect()),
            );
            Bson::Document(doc)
        }
        other => to_bson(other),
    }
}

/// A BSON `_id` as an entity id.
pub(crate) fn id_from_bson(id: &Bson) -> Result<Value> {
    match id {
        Bson::Document(doc) if doc.len() == 1 && doc.contains_key(ARRAY_ID_FIELD) => {
            match doc.get(ARRAY_ID_FIELD) {
                Some(Bson::Array(items)) => Ok(Value::Array(
                    items.iter().map(id_from_bson).collect::<Result<_>>()?,
                )),
                _ => Err(invalid("an array id wrapper without an array")),
            }
        }
        other => from_bson(other),
    }
}

/// The version stored in a document: `_v` as an integer; missing or null is 0.
pub(crate) fn version_of(doc: &Document) -> Result<Version> {
    match doc.get(VERSION_FIELD) {
        None | Some(Bson::Null) => Ok(0),
        Some(Bson::Int32(i)) => {
            u64::try_from(*i).map_err(|_| invalid(format!("negative version {i}")))
        }
        Some(Bson::Int64(i)) => {
            u64::try_from(*i).map_err(|_| invalid(format!("negative version {i}")))
        }
        Some(Bson::Double(f)) if f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15 => Ok(*f as u64),
        Some(other) => Err(invalid(format!(
            "version field {VERSION_FIELD} holds {other}"
        ))),
    }
}

/// A version as BSON (Int64).
pub(crate) fn version_to_bson(v: Version) -> Result<Bson> {
    i64::try_from(v)
        .map(Bson::Int64)
        .map_err(|_| invalid(format!("version {v} does not fit a BSON Int64")))
}

/// An entity as the document to store: `_id`, `_v`, then the properties.
pub(crate) fn entity_to_document(entity: &Entity) -> Result<Document> {
    let mut doc = Document::new();
    doc.insert("_id", id_to_bson(&entity.key.id));
    doc.insert(VERSION_FIELD, version_to_bson(entity.version)?);
    for (k, v) in &entity.value {
        doc.insert(escape_name(k), to_bson(v));
    }
    Ok(doc)
}

/// A document the server sent, read as it is. The driver's own decoding of a
/// `Document` (serde) takes a field named like an extended JSON key (`$oid`,
/// `$date`, `$numberLong`...) for the value it stands for, and so changes or
/// refuses a document another program wrote with such a field name (legal
/// since MongoDB 5.0): every read of stored documents goes through here.
pub(crate) fn from_raw(raw: &mongodb::bson::RawDocument) -> Result<Document> {
    Document::try_from(raw).map_err(|e| invalid(format!("a malformed BSON document: {e}")))
}

/// [`from_raw`] of each document.
pub(crate) fn from_raw_all(raws: &[mongodb::bson::RawDocumentBuf]) -> Result<Vec<Document>> {
    raws.iter().map(|r| from_raw(r)).collect()
}

/// A stored document as an entity of `kind`.
pub(crate) fn document_to_entity(kind: &str, doc: &Document) -> Result<Entity> {
    let id = doc
        .get("_id")
        .ok_or_else(|| invalid("a document without _id"))
        .and_then(id_from_bson)?;
    let version = version_of(doc)?;
    let mut value = Map::new();
    for (k, v) in doc {
        if k == "_id" || k == VERSION_FIELD {
            continue;
        }
        insert_field(&mut value, doc, k, v)?;
    }
    Key::new(kind, id)
        .map(|key| Entity {
            key,
            version,
            value,
        })
        .map_err(|e| invalid(format!("{e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip() {
        for n in [
            "", "a", "$bytes", "$", "a.b", "%", "%25", "_id", "_v", "a\0b", "x$", "é.$", "$a.b%",
        ] {
            let e = escape_name(n);
            assert!(!e.is_empty() && !e.contains('\0'), "{n:?} -> {e:?}");
            assert!(e != "_id" && e != "_v");
            assert_eq!(unescape_name(&e).as_deref(), Some(n), "{n:?} -> {e:?}");
        }
        // Dotted and `$` names are stored as they are; what tern wrote before still reads.
        assert_eq!(escape_name("a.b"), "a.b");
        assert_eq!(escape_name("$x"), "$x");
        assert_eq!(escape_name("$a.b%"), "$a.b%25");
        assert_eq!(unescape_name("a%2Eb").as_deref(), Some("a.b"));
        assert_eq!(unescape_name("%24x").as_deref(), Some("$x"));
        assert_eq!(unescape_name("%24a%2Eb%25").as_deref(), Some("$a.b%"));
        assert_eq!(unescape_name(ARRAY_ID_FIELD), None);
        assert_eq!(unescape_name(WIDE_DATE_FIELD), None);
        // Names another program wrote that tern would write back otherwise.
        for field in ["progress%", "a%41", "a%2e", "%2", "%zz", "a%24"] {
            assert_eq!(unescape_name(field), None, "{field:?}");
        }
    }

    proptest! {
        /// Every property name made of the characters that matter reads back
        /// from both forms it may be stored in, and no two names share a field.
        #[test]
        fn both_stored_forms_read_back(name in "[a$.%_\\x00idv2E4]{0,6}") {
            let canonical = escape_name(&name);
            prop_assert!(!canonical.contains('\0'));
            prop_assert_eq!(unescape_name(&canonical), Some(name.clone()));
            let legacy = legacy_field_name(&name);
            prop_assert_eq!(legacy.is_some(), has_two_forms(&name));
            if let Some(legacy) = legacy {
                prop_assert!(!legacy.starts_with('$') && !legacy.contains('.'));
                prop_assert_eq!(unescape_name(&legacy), Some(name.clone()));
                prop_assert_eq!(legacy_of_field(&canonical), Some(legacy));
            }
        }
    }

    /// Item 12: a document another program wrote with dotted and `$` names,
    /// at the top and nested, reads with the names as they are.
    #[test]
    fn item12_dotted_and_dollar_fields_read_as_they_are() {
        let mut nested = Document::new();
        nested.insert("$y", 3);
        nested.insert("c.d", "v");
        let mut doc = Document::new();
        doc.insert("_id", 1);
        doc.insert("a.b", 1);
        doc.insert("$x", 2.5);
        doc.insert("m", nested);
        let e = document_to_entity("k", &doc).unwrap();
        let names: Vec<&str> = e.value.keys().map(String::as_str).collect();
        assert_eq!(names, ["$x", "a.b", "m"]);
        assert_eq!(e.value["a.b"], Value::Int(1));
        assert_eq!(e.value["$x"], Value::Float(2.5));
        let Value::Map(m) = &e.value["m"] else {
            panic!("{:?}", e.value["m"])
        };
        assert_eq!(m["$y"], Value::Int(3));
        assert_eq!(m["c.d"], Value::from("v"));
        // Written back under the same names, in every field.
        let back = entity_to_document(&e).unwrap();
        for (k, v) in &doc {
            assert_eq!(
                back.get(k).map(|b| from_bson(b).unwrap()),
                Some(from_bson(v).unwrap()),
                "{k}"
            );
        }
    }

    #[test]
    fn a_property_held_in_both_forms_is_refused_naming_both() {
        let doc = mongodb::bson::doc! { "_id": 1, "a%2Eb": 1, "a.b": 2 };
        let err = document_to_entity("k", &doc).unwrap_err().to_string();
        assert!(
            err.contains("\"a%2Eb\"") && err.contains("\"a.b\""),
            "{err}"
        );
    }

    #[test]
    fn a_plain_document_that_reads_as_a_tag_is_refused() {
        let hex = "0123456789abcdef01234567";
        let mut inner = Document::new();
        inner.insert("$oid", hex);
        let doc = mongodb::bson::doc! { "_id": 1, "ref": inner.clone() };
        let err = document_to_entity("k", &doc).unwrap_err().to_string();
        assert!(err.contains("\"$oid\""), "{err}");
        // Not a tag (no valid hex): read as the document it is, written back as one.
        let doc = mongodb::bson::doc! { "_id": 1_i64, "ref": { "$oid": "zz" } };
        let e = document_to_entity("k", &doc).unwrap();
        assert_eq!(
            entity_to_document(&e).unwrap(),
            mongodb::bson::doc! { "_id": 1_i64, "_v": 0_i64, "ref": { "$oid": "zz" } }
        );
    }
}
