//! Keys and values: how entities are laid out in Redis (see `docs.md`).

use serde_json::Value as Json;
use tern_core::model::{Entity, Key, Map, Value, Version};
use tern_core::store::{Error, ErrorKind, Result};

use crate::config::RedisConfig;
use crate::json_value::{value_from_json, value_to_json};

/// The kind name under which tern keeps its metadata (`ns:__tern:meta:<name>`).
pub(crate) const META_KIND: &str = "__tern";

/// The empty string id as typed JSON (`#` then `""`), which [`decode_id`] reads back.
const EMPTY_ID: &str = "#\"\"";

/// Redis key names for one configuration.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    /// `ns:` or empty.
    ns: String,
    sep: String,
    /// The declared kinds (`?kinds=` and the layout options), longest first.
    declared: Vec<String>,
    /// Each id is written as a hash tag (`?id_tag=1`): `ns:kind:{id}`, so the
    /// keys of one id under every kind name lie in one cluster slot.
    id_tag: bool,
}

impl Keys {
    pub(crate) fn new(config: &RedisConfig) -> Keys {
        Keys {
            ns: config
                .prefix
                .as_ref()
                .map(|p| format!("{p}{}", config.separator))
                .unwrap_or_default(),
            sep: config.separator.clone(),
            declared: {
                let mut d: Vec<String> = config.declared.iter().cloned().collect();
                d.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
                d
            },
            id_tag: config.id_tag,
        }
    }

    /// The namespace part every key of this store starts with (`ns:` or empty).
    pub(crate) fn namespace(&self) -> &str {
        &self.ns
    }

    /// Checks that `kind` can name a key prefix of its own: a kind that holds
    /// the separator must be declared (`?kinds=`), and a key of the kind must
    /// not read as a longer declared kind.
    pub(crate) fn check_kind(&self, kind: &str) -> Result<()> {
        if kind.contains(self.sep.as_str()) && !self.declared.iter().any(|d| d == kind) {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "kind {kind:?} contains the key separator {:?}: declare it in the store URL \
                     (?kinds={kind}) or choose another separator with ?sep=",
                    self.sep
                ),
            )
            .with_context("kind", kind));
        }
        if kind == META_KIND {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("kind {META_KIND:?} is reserved for tern's metadata"),
            ));
        }
        if self.id_tag && kind.contains('{') {
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "kind {kind:?} holds a brace: with id_tag=1 the hash tag of a key must be \
                     its id, so that the keys of one id under every kind name share a cluster \
                     slot; choose a kind name without braces"
                ),
            )
            .with_context("kind", kind));
        }
        Ok(())
    }

    /// `ns:kind:` — the prefix of every key of `kind`.
    pub(crate) fn kind_prefix(&self, kind: &str) -> String {
        format!("{}{kind}{}", self.ns, self.sep)
    }

    /// The SCAN pattern of the keys of `kind`.
    pub(crate) fn kind_pattern(&self, kind: &str) -> String {
        format!("{}*", glob_escape(&self.kind_prefix(kind)))
    }

    /// The Redis key of an entity: `ns:kind:id`, or `ns:kind:{id}` with
    /// `?id_tag=1`.
    pub(crate) fn entity_key(&self, key: &Key) -> Result<String> {
        self.check_kind(&key.kind)?;
        // A plain string id is written as it is: the key in one allocation.
        let encoded;
        let id = match &key.id {
            Value::String(s) if !s.starts_with('#') => s.as_str(),
            other => {
                encoded = encode_id(other);
                encoded.as_str()
            }
        };
        let mut redis_key =
            String::with_capacity(self.ns.len() + key.kind.len() + self.sep.len() + id.len() + 2);
        redis_key.push_str(&self.ns);
        redis_key.push_str(&key.kind);
        redis_key.push_str(&self.sep);
        if self.id_tag {
            // `{}` is no hash tag (the slot would follow the whole key): the
            // empty id is written in its typed form, `{#""}`.
            redis_key.push('{');
            redis_key.push_str(if id.is_empty() { EMPTY_ID } else { id });
            redis_key.push('}');
        } else {
            redis_key.push_str(id);
        }
        match self.kind_of(&redis_key) {
            Some(kind) if kind == key.kind => Ok(redis_key),
            other => Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "the Redis key {redis_key:?} of this entity would read as an entity of kind \
                     {:?} (the longest declared kind it starts with, ?kinds=): choose another id \
                     or declare the kinds differently",
                    other.unwrap_or_default()
                ),
            )
            .with_context("key", key.to_string())),
        }
    }

    /// The declared kinds that extend `kind` (`kind:sub...`): their keys match
    /// the SCAN pattern of `kind` but are not entities of it.
    pub(crate) fn has_subkinds(&self, kind: &str) -> bool {
        let prefix = format!("{kind}{}", self.sep);
        self.declared.iter().any(|d| d.starts_with(prefix.as_str()))
    }

    /// Is `redis_key` (found by a scan of `kind`) an entity key of `kind`, and
    /// not of a longer declared kind? Resolved per key.
    pub(crate) fn owns(&self, kind: &str, redis_key: &str) -> bool {
        self.kind_of(redis_key) == Some(kind)
    }

    /// The version tag of a container (set, list, sorted set, plain string)
    /// at `redis_key`: a string key in the same cluster slot (hash tags), so a
    /// script can touch both: `ns:__tern:v:{<key>}`, or `ns:__tern:v:<key>`
    /// when the key holds braces (then its own hash tag, if any, decides).
    pub(crate) fn version_key(&self, redis_key: &str) -> String {
        if redis_key.contains(['{', '}']) {
            format!("{}{META_KIND}{}v{}{redis_key}", self.ns, self.sep, self.sep)
        } else {
            format!(
                "{}{META_KIND}{}v{}{{{redis_key}}}",
                self.ns, self.sep, self.sep
            )
        }
    }

    /// The key of a Redis key name found by a scan of `kind`, if it is one.
    pub(crate) fn parse_entity_key(&self, kind: &str, redis_key: &str) -> Result<Key> {
        let prefix = self.kind_prefix(kind);
        let text = redis_key.strip_prefix(prefix.as_str()).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidData,
                "a scanned key lacks its kind prefix",
            )
            .with_context("key", redis_key)
        })?;
        let text = if self.id_tag {
            text.strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::InvalidData,
                        format!(
                            "a key of kind {kind:?} is not of the form {}{{id}}, which the store \
                             URL declares (id_tag=1): rename the key, or drop id_tag=1 if the \
                             store's keys carry no hash tag",
                            self.kind_prefix(kind)
                        ),
                    )
                    .with_context("key", redis_key)
                })?
        } else {
            text
        };
        let id = decode_id(text).map_err(|e| e.with_context("key", redis_key))?;
        Key::new(kind, id).map_err(|e| {
            Error::new(
                ErrorKind::InvalidData,
                "a Redis key does not name an entity",
            )
            .with_context("key", redis_key)
            .with_source(e)
        })
    }

    /// The prefix of every metadata key.
    pub(crate) fn meta_prefix(&self) -> String {
        format!("{}{META_KIND}{}meta{}", self.ns, self.sep, self.sep)
    }

    /// The Redis key of the metadata document `name`.
    pub(crate) fn meta_key(&self, name: &str) -> String {
        format!("{}{name}", self.meta_prefix())
    }

    /// The kind of a Redis key, if it is an entity key: the longest declared
    /// kind it starts with (followed by the separator), else its first segment
    /// (KVolve's namespace resolution, per key).
    pub(crate) fn kind_of<'a>(&self, redis_key: &'a str) -> Option<&'a str> {
        let rest = redis_key.strip_prefix(self.ns.as_str())?;
        for d in &self.declared {
            if rest.starts_with(d.as_str()) && rest[d.len()..].starts_with(self.sep.as_str()) {
                return Some(&rest[..d.len()]);
            }
        }
        let (kind, _) = rest.split_once(self.sep.as_str())?;
        (!kind.is_empty() && kind != META_KIND).then_some(kind)
    }
}

/// Escapes the glob characters of SCAN MATCH.
pub(crate) fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A string id is itself, unless it starts with `#`; every other id (and such
/// a string) is `#` followed by tern's typed JSON of the id: `7` → `#7`.
pub(crate) fn encode_id(id: &Value) -> String {
    match id {
        Value::String(s) if !s.starts_with('#') => s.clone(),
        other => format!("#{}", value_to_json(other)),
    }
}

/// The inverse of [`encode_id`].
pub(crate) fn decode_id(text: &str) -> Result<Value> {
    match text.strip_prefix('#') {
        None => Ok(Value::String(text.to_owned())),
        Some(json) => {
            let parsed: Json = serde_json::from_str(json).map_err(|e| {
                Error::new(ErrorKind::InvalidData, "an id after '#' is not typed JSON")
                    .with_source(e)
            })?;
            value_from_json(&parsed).map_err(|e| {
                Error::new(
                    ErrorKind::InvalidData,
                    format!("an id after '#' is not typed JSON: {e}"),
                )
            })
        }
    }
}

/// The text of one hash field: a string that reads back as itself
/// ([`decode_field`]: not JSON text, or JSON whose numbers tern cannot hold
/// exactly) is stored as it is (`Ann`, `3.14159265358979323846`); every other
/// value, and strings that would read as something else (`"5"`, `"true"`), as
/// tern's typed JSON (`5`, `5.0`, `"\"5\""`, `{"$bytes":"..."}`).
pub(crate) fn encode_field(value: &Value) -> String {
    match value {
        Value::String(s) if reads_as_itself(s) => s.clone(),
        other => value_to_json(other).to_string(),
    }
}

/// Whether [`decode_field`] reads `text` as text although it may parse as
/// JSON (`{"$bytes": 5}`, `3.14159265358979323846`): such a field is compared
/// byte for byte by the compare-and-set, not as the JSON `cjson` reads.
pub(crate) fn reads_as_text(text: &str) -> bool {
    may_be_json(text) && matches!(read_field(text), Field::Text)
}

/// Whether [`decode_field`] reads `text` back as the string `text`.
fn reads_as_itself(text: &str) -> bool {
    !may_be_json(text) || matches!(read_field(text), Field::Text)
}

/// Whether `text` can parse as JSON at all: its first character after JSON's
/// whitespace starts a JSON value. (When not, it is a plain string, found
/// without building a parse error: most text fields.)
fn may_be_json(text: &str) -> bool {
    matches!(
        text.trim_start_matches([' ', '\t', '\n', '\r'])
            .as_bytes()
            .first(),
        Some(b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')
    )
}

/// What a hash field's text reads as.
enum Field {
    /// A value of tern's typed JSON, every number in it exact.
    Value(Value),
    /// The text itself, as a string.
    Text,
}

/// Reads a field that may be JSON: a value when the text is tern's typed JSON
/// and every number in it survives the reading ([`exact::numbers_exact`]),
/// else the text itself: a field another program wrote
/// (`3.14159265358979323846`, `{"$bytes": 5}`) is never read into a value
/// that would be written back with other digits, nor refused.
fn read_field(text: &str) -> Field {
    let Ok(json) = serde_json::from_str::<Json>(text) else {
        return Field::Text;
    };
    match value_from_json(&json) {
        Ok(v) if !holds_float(&v) || crate::exact::numbers_exact(text) => Field::Value(v),
        _ => Field::Text,
    }
}

/// Whether `v` is or holds a float (the only values whose text may not
/// survive the reading: integers outside an `i64` are refused by the reading).
fn holds_float(v: &Value) -> bool {
    match v {
        Value::Float(_) => true,
        Value::Array(items) => items.iter().any(holds_float),
        Value::Map(m) => m.values().any(holds_float),
        _ => false,
    }
}

/// The inverse of [`encode_field`]. Text that is not JSON, or that holds a
/// number tern cannot hold exactly, is a string (the text itself, not a
/// copy).
pub(crate) fn decode_field(text: String) -> Value {
    if !may_be_json(&text) {
        return Value::String(text);
    }
    match read_field(&text) {
        Field::Value(v) => v,
        Field::Text => Value::String(text),
    }
}

fn version_clash(field: &str) -> Error {
    Error::new(
        ErrorKind::InvalidData,
        format!("the entity has a property named {field:?}, the version field of this store"),
    )
}

/// The hash of an entity: field/value pairs, the version field included.
pub(crate) fn entity_to_hash(entity: &Entity, version_field: &str) -> Result<Vec<String>> {
    let mut out = Vec::with_capacity(entity.value.len() * 2 + 2);
    for (name, value) in &entity.value {
        if name == version_field {
            return Err(version_clash(version_field).with_context("key", entity.key.to_string()));
        }
        out.push(name.clone());
        out.push(encode_field(value));
    }
    out.push(version_field.to_owned());
    out.push(entity.version.to_string());
    Ok(out)
}

fn parse_version(text: &str) -> Result<Version> {
    text.parse().map_err(|e| {
        Error::new(
            ErrorKind::InvalidData,
            format!("the version field holds {text:?}, not a non-negative integer"),
        )
        .with_source(e)
    })
}

/// An entity from its hash fields (as HGETALL returns them). `None` for an empty hash.
pub(crate) fn entity_from_hash(
    key: Key,
    fields: Vec<(String, String)>,
    version_field: &str,
) -> Result<Option<Entity>> {
    if fields.is_empty() {
        return Ok(None);
    }
    let mut version = 0;
    let mut value = Map::new();
    for (name, text) in fields {
        if name == version_field {
            version = parse_version(&text).map_err(|e| e.with_context("key", key.to_string()))?;
        } else {
            value.insert(name, decode_field(text));
        }
    }
    Ok(Some(Entity {
        key,
        version,
        value,
    }))
}

/// The JSON string of an entity: tern's JSON of the map with the version field added.
pub(crate) fn entity_to_json(entity: &Entity, version_field: &str) -> Result<String> {
    if entity.value.contains_key(version_field) {
        return Err(version_clash(version_field).with_context("key", entity.key.to_string()));
    }
    Ok(crate::typed_json::write_entity(
        &entity.value,
        version_field,
        entity.version,
    ))
}

/// The inverse of [`entity_to_json`].
pub(crate) fn entity_from_json(key: Key, text: &str, version_field: &str) -> Result<Entity> {
    let bad = |m: &str| {
        Error::new(ErrorKind::InvalidData, format!("a JSON-string entity {m}"))
            .with_context("key", key.to_string())
    };
    let (version, value) = crate::typed_json::read_entity(text, version_field)
        .map_err(|e| bad(&format!("cannot be read: {e}")))?;
    if value.values().any(holds_float) && !crate::exact::numbers_exact(text) {
        return Err(bad(
            "holds a number that a 64-bit float cannot hold to its last digit (more digits than \
             the float's shortest form, at most 17 significant ones, or out of range): tern would \
             write it back with other digits, so it does not read it; store such numbers as \
             strings",
        ));
    }
    Ok(Entity {
        key,
        version,
        value,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_of_a_key_is_its_longest_declared_prefix() {
        let config = RedisConfig::from_url(
            "redis://127.0.0.1/?prefix=ns&kinds=amico:followers,amico:followers:default",
        )
        .unwrap();
        let keys = Keys::new(&config);
        assert_eq!(
            keys.kind_of("ns:amico:followers:7"),
            Some("amico:followers")
        );
        assert_eq!(
            keys.kind_of("ns:amico:followers:default:7"),
            Some("amico:followers:default")
        );
        assert_eq!(keys.kind_of("ns:amico:blocked:7"), Some("amico"));
        assert_eq!(keys.kind_of("ns:user:7"), Some("user"));
        assert_eq!(keys.kind_of("ns:__tern:v:{ns:user:7}"), None);
        assert!(keys.owns("amico:followers", "ns:amico:followers:7"));
        assert!(!keys.owns("amico:followers", "ns:amico:followers:default:7"));
        assert!(keys.has_subkinds("amico:followers"));
        assert!(!keys.has_subkinds("amico:followers:default"));
        // An undeclared kind with the separator is refused; an id that would read
        // as a longer declared kind too.
        let undeclared = Key::new("amico:blocked", "7").unwrap();
        assert_eq!(
            keys.entity_key(&undeclared).unwrap_err().kind(),
            ErrorKind::Unsupported
        );
        let shadowed = Key::new("amico:followers", "default:7").unwrap();
        assert_eq!(
            keys.entity_key(&shadowed).unwrap_err().kind(),
            ErrorKind::Unsupported
        );
        let fine = Key::new("amico:followers:default", "7").unwrap();
        assert_eq!(
            keys.entity_key(&fine).unwrap(),
            "ns:amico:followers:default:7"
        );
    }

    /// What Redis Cluster hashes of a key: the text between its first `{`
    /// and the first `}` after it, when not empty; else the whole key.
    fn hash_tag(key: &str) -> &str {
        key.find('{')
            .and_then(|open| {
                let rest = &key[open + 1..];
                rest.find('}').map(|close| &rest[..close])
            })
            .filter(|tag| !tag.is_empty())
            .unwrap_or(key)
    }

    #[test]
    fn with_id_tag_the_keys_of_one_id_share_a_slot_under_every_kind() {
        let keys = Keys::new(
            &RedisConfig::from_url("redis://127.0.0.1/?prefix=ns&id_tag=1&kinds=a:b,a:b:c")
                .unwrap(),
        );
        for id in [Value::from("u1"), Value::Int(5), Value::from("x}y")] {
            let old = keys
                .entity_key(&Key::new("a:b", id.clone()).unwrap())
                .unwrap();
            let new = keys
                .entity_key(&Key::new("a:b:c", id.clone()).unwrap())
                .unwrap();
            let other = keys
                .entity_key(&Key::new("z", id.clone()).unwrap())
                .unwrap();
            let tag = hash_tag(&old);
            assert_eq!(hash_tag(&new), tag, "{old} {new}");
            assert_eq!(hash_tag(&other), tag, "{old} {other}");
            assert_eq!(hash_tag(&keys.version_key(&new)), tag);
            // Read back as the kind that owns it, with the id it was written for.
            assert_eq!(keys.kind_of(&new), Some("a:b:c"));
            assert_eq!(keys.parse_entity_key("a:b:c", &new).unwrap().id, id);
        }
        assert_eq!(
            keys.entity_key(&Key::new("a:b", "u1").unwrap()).unwrap(),
            "ns:a:b:{u1}"
        );
    }

    #[test]
    fn with_id_tag_untagged_keys_and_braced_kinds_are_refused_and_the_empty_id_is_typed() {
        let keys =
            Keys::new(&RedisConfig::from_url("redis://127.0.0.1/?prefix=ns&id_tag=1").unwrap());
        let e = keys.parse_entity_key("a", "ns:a:u1").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData);
        assert!(e.to_string().contains("id_tag=1"), "{e}");
        assert!(keys.parse_entity_key("a", "ns:a:{}").is_err());
        let e = keys
            .entity_key(&Key::new("k{x}", "u1").unwrap())
            .unwrap_err();
        assert!(e.to_string().contains("without braces"), "{e}");
        // The empty id is written typed, a non-empty hash tag.
        let empty = Key::new("a", "").unwrap();
        let redis_key = keys.entity_key(&empty).unwrap();
        assert_eq!(redis_key, "ns:a:{#\"\"}");
        assert_eq!(keys.parse_entity_key("a", &redis_key).unwrap(), empty);
    }

    #[test]
    fn version_keys_share_the_slot_of_their_key() {
        let keys = Keys::new(&RedisConfig::from_url("redis://127.0.0.1/?prefix=ns").unwrap());
        assert_eq!(keys.version_key("ns:s:1"), "ns:__tern:v:{ns:s:1}");
        assert_eq!(keys.version_key("ns:s:{a}1"), "ns:__tern:v:ns:s:{a}1");
    }

    #[test]
    fn ids_round_trip() {
        for id in [
            Value::from("abc"),
            Value::from("#x"),
            Value::from("5"),
            Value::Int(5),
            Value::Int(-7),
            Value::Bytes(vec![0, 255]),
            Value::Timestamp(12),
            Value::Array(vec![Value::Int(1), Value::from("a:b")]),
        ] {
            assert_eq!(decode_id(&encode_id(&id)).unwrap(), id, "{id:?}");
        }
        assert_eq!(encode_id(&Value::Int(5)), "#5");
        assert_eq!(encode_id(&Value::from("u1")), "u1");
    }

    #[test]
    fn fields_round_trip() {
        for v in [
            Value::from("Ann"),
            Value::from(""),
            Value::from("5"),
            Value::from("true"),
            Value::from("\"q\""),
            Value::Int(5),
            Value::Float(5.0),
            Value::Float(f64::NAN),
            Value::Float(f64::from_bits(0x7ff8_0000_dead_beef)),
            Value::Float(-0.0),
            Value::Null,
            Value::Bool(true),
            Value::Bytes(vec![1, 2]),
            Value::Timestamp(-3),
            Value::Array(vec![Value::Int(1), Value::Float(1.0)]),
        ] {
            assert_eq!(decode_field(encode_field(&v)), v, "{v:?}");
        }
        assert_eq!(encode_field(&Value::from("Ann")), "Ann");
        assert_eq!(encode_field(&Value::Int(5)), "5");
        for text in [" 1", "\t[1]", "\n\"x\"", "nope", "-", "x1", " x", ""] {
            let parses = serde_json::from_str::<Json>(text).is_ok();
            assert!(!parses || may_be_json(text), "{text:?}");
        }
    }

    /// A JSON-string entity another program wrote with a number tern cannot
    /// hold exactly is refused with the reason, not read with other digits.
    #[test]
    fn a_json_entity_holding_a_number_tern_cannot_hold_is_refused() {
        let key = Key::new("k", 1).unwrap();
        let e =
            entity_from_json(key.clone(), r#"{"pi": 3.14159265358979323846}"#, "_v").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData);
        assert!(e.to_string().contains("to its last digit"), "{e}");
        let read = entity_from_json(key, r#"{"p": 1.50, "s": "3.14159265358979323846"}"#, "_v");
        assert_eq!(read.unwrap().get("p"), Some(&Value::Float(1.5)));
    }

    /// A field another program wrote with a number tern cannot hold exactly
    /// (or with text that looks like a tag of tern's typed JSON) reads as its
    /// text and is written back as it was: never with other digits, never
    /// refused. Numbers tern holds are numbers (written back in its form).
    #[test]
    fn a_field_holding_a_number_tern_cannot_hold_stays_its_text() {
        for text in [
            "3.14159265358979323846",
            "123456789012345678901234",
            "12345678901234567890",
            "[1, 0.30000000000000000001]",
            "{\"price\": 19.999999999999999999}",
            "{\"$bytes\": 5}",
            "1e-400",
        ] {
            let v = decode_field(text.to_owned());
            assert_eq!(v, Value::from(text), "{text}");
            assert_eq!(encode_field(&v), text, "{text}");
        }
        assert_eq!(decode_field("1.50".into()), Value::Float(1.5));
        assert_eq!(encode_field(&Value::Float(1.5)), "1.5");
        assert_eq!(
            decode_field("[1, 2e0]".into()),
            Value::Array(vec![Value::Int(1), Value::Float(2.0)])
        );
        // A string whose text would read as a number is still written quoted.
        assert_eq!(encode_field(&Value::from("1.50")), "\"1.50\"");
    }

    proptest::proptest! {
        /// Every value reads back as written, and so does every string.
        #[test]
        fn any_field_round_trips(v in tern_core::model::arb::arb_value(), s in "\\PC{0,12}") {
            proptest::prop_assert_eq!(decode_field(encode_field(&v)), v);
            let text = Value::String(s);
            proptest::prop_assert_eq!(decode_field(encode_field(&text)), text);
        }

        /// A number another program wrote reads as a value written back with
        /// the same decimal value (`1.50` as `1.5`), or as its own text: never
        /// with other digits.
        #[test]
        fn foreign_numbers_keep_their_value(
            text in "-?[0-9]{1,22}(\\.[0-9]{1,22})?([eE][-+]?[0-9]{1,3})?"
        ) {
            let back = encode_field(&decode_field(text.clone()));
            if back != text {
                proptest::prop_assert_eq!(
                    crate::exact::decimal(&back),
                    crate::exact::decimal(&text),
                    "{} written back as {}", text, back
                );
            }
        }

        /// A JSON-string entity reads back as written.
        #[test]
        fn json_entities_round_trip(entity in tern_core::model::arb::arb_entity("k")) {
            proptest::prop_assume!(!entity.value.contains_key("_v"));
            let text = entity_to_json(&entity, "_v").unwrap();
            let back = entity_from_json(entity.key.clone(), &text, "_v").unwrap();
            proptest::prop_assert_eq!(back, entity);
        }

        /// The shortcut never calls JSON text a plain string.
        #[test]
        fn may_be_json_never_misses_json(text in "[ \t\n\r]{0,2}[\\x00-\\x7f]{0,6}") {
            if serde_json::from_str::<Json>(&text).is_ok() {
                proptest::prop_assert!(may_be_json(&text));
            }
        }
    }
}
