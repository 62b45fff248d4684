//! tern's Redis layout for programs that read and write the keys themselves,
//! without a connection of this crate: the server module
//! (`tern-redis-module`) migrates entities inside Redis and must name and
//! encode them exactly as [`crate::RedisStore`] does. Thin, stable wrappers
//! over the adapter's own key and value codecs (no second implementation).

use tern_core::model::{Entity, Key, Version};
use tern_core::store::Result;

use crate::codec::Keys;
use crate::config::{KindLayout, RedisConfig};

/// The key names and value encodings of one store URL.
#[derive(Debug, Clone)]
pub struct Wire {
    config: RedisConfig,
    keys: Keys,
}

impl Wire {
    /// The layout of the store named by `url` (host and credentials are not used).
    ///
    /// # Errors
    /// As [`RedisConfig::from_url`].
    pub fn from_url(url: &str) -> Result<Wire> {
        let config = RedisConfig::from_url(url)?;
        let keys = Keys::new(&config);
        Ok(Wire { config, keys })
    }

    /// The parsed URL.
    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// The Redis key of tern's state document (a hash: fields `rev` and `doc`).
    pub fn state_key(&self) -> String {
        self.keys.meta_key(tern_core::migrate::state::STATE_DOC)
    }

    /// The namespace every key of the store starts with (`ns:` or empty).
    pub fn namespace(&self) -> &str {
        self.keys.namespace()
    }

    /// `ns:kind:`, the prefix of every key of `kind`.
    pub fn kind_prefix(&self, kind: &str) -> String {
        self.keys.kind_prefix(kind)
    }

    /// The kind of a Redis key (the longest declared kind it starts with, else its
    /// first segment); `None` for tern's own keys and keys outside the namespace.
    pub fn kind_of<'a>(&self, redis_key: &'a str) -> Option<&'a str> {
        self.keys.kind_of(redis_key)
    }

    /// The layout of `kind`.
    pub fn layout(&self, kind: &str) -> KindLayout {
        self.config.layout(kind)
    }

    /// The version field of hashes and JSON strings.
    pub fn version_field(&self) -> &str {
        &self.config.version_field
    }

    /// The key of the entity that `redis_key` (a key of `kind`) names.
    ///
    /// # Errors
    /// `InvalidData` when the key does not name an entity of `kind`.
    pub fn parse_entity_key(&self, kind: &str, redis_key: &str) -> Result<Key> {
        self.keys.parse_entity_key(kind, redis_key)
    }

    /// The companion key holding a container's version tag.
    pub fn version_key(&self, redis_key: &str) -> String {
        self.keys.version_key(redis_key)
    }

    /// The version tag a container of `layout` at `version` holding `value`
    /// (a plain string's value; ignored for other layouts) gets: a plain
    /// string's tag is `<version>:<sha1 hex of the value>`, so a value another
    /// program writes over it later reads as version 0 (the tag outlives the
    /// value it described); other containers' tags are the bare version.
    /// Lua's twin is `lua/text_tag.lua`.
    pub fn container_tag(&self, layout: KindLayout, version: Version, value: &[u8]) -> String {
        container_tag(layout, version, value)
    }

    /// The version the stored `tag` (absent: `None`) gives a container of
    /// `layout` whose value (a plain string's) is `value`: 0 without a tag, or
    /// for a plain string whose value is not the one the tag's digest names
    /// (a bare tag on a string, written before tags held the digest, reads as
    /// it says).
    ///
    /// # Errors
    /// `InvalidData` for a tag that is not a version.
    pub fn tag_version(
        &self,
        layout: KindLayout,
        tag: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Result<Version> {
        tag_version(layout, tag, value)
    }

    /// The entity of a hash (fields as HGETALL returns them); `None` when empty.
    ///
    /// # Errors
    /// `InvalidData` for a version field that is not a number.
    pub fn decode_hash(&self, key: Key, fields: Vec<(String, String)>) -> Result<Option<Entity>> {
        crate::codec::entity_from_hash(key, fields, &self.config.version_field)
    }

    /// The field/value pairs of an entity's hash, the version field included.
    ///
    /// # Errors
    /// `InvalidData` when the entity has a property named as the version field.
    pub fn encode_hash(&self, entity: &Entity) -> Result<Vec<String>> {
        crate::codec::entity_to_hash(entity, &self.config.version_field)
    }

    /// The text of one hash field holding `value`, as tern writes it.
    pub fn encode_field(&self, value: &tern_core::model::Value) -> String {
        crate::codec::encode_field(value)
    }

    /// The entity of a JSON string.
    ///
    /// # Errors
    /// `InvalidData` for text tern cannot read as its JSON.
    pub fn decode_json(&self, key: Key, text: &str) -> Result<Entity> {
        crate::codec::entity_from_json(key, text, &self.config.version_field)
    }

    /// The JSON string of an entity, with its version.
    ///
    /// # Errors
    /// `InvalidData` when the entity has a property named as the version field.
    pub fn encode_json(&self, entity: &Entity) -> Result<String> {
        crate::codec::entity_to_json(entity, &self.config.version_field)
    }

    /// The entity of a container (plain string, set, list, sorted set) from its
    /// version and items (the value; the members; the items; member/score pairs).
    ///
    /// # Errors
    /// `InvalidData` for a score that is not a number.
    pub fn decode_container(
        &self,
        key: Key,
        layout: KindLayout,
        version: Version,
        items: Vec<Vec<u8>>,
    ) -> Result<Option<Entity>> {
        let mut reply = Vec::with_capacity(items.len() + 1);
        reply.push(version.to_string().into_bytes());
        reply.extend(items);
        crate::containers::from_items(key, layout, Some(reply))
    }

    /// The items of a container entity (`[value]`; members; items; score/member
    /// pairs, ZADD's order), without its version.
    ///
    /// # Errors
    /// `InvalidData` when the entity does not have the layout's shape.
    pub fn encode_container(&self, entity: &Entity, layout: KindLayout) -> Result<Vec<Vec<u8>>> {
        let mut items = crate::containers::to_items(entity, layout)?;
        items.remove(0);
        Ok(items)
    }
}

/// See [`Wire::container_tag`].
pub(crate) fn container_tag(layout: KindLayout, version: Version, value: &[u8]) -> String {
    if layout == KindLayout::Text {
        format!("{version}:{}", sha1_smol::Sha1::from(value).digest())
    } else {
        version.to_string()
    }
}

/// See [`Wire::tag_version`].
pub(crate) fn tag_version(
    layout: KindLayout,
    tag: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<Version> {
    let Some(tag) = tag else { return Ok(0) };
    let bad = || {
        tern_core::store::Error::new(
            tern_core::store::ErrorKind::InvalidData,
            "the version tag of a container is not a non-negative integer",
        )
    };
    let text = std::str::from_utf8(tag).map_err(|_| bad())?;
    let (version, digest) = match text.split_once(':') {
        Some((v, d)) if layout == KindLayout::Text => (v, Some(d)),
        _ => (text, None),
    };
    let version: Version = version.parse().map_err(|_| bad())?;
    match (digest, value) {
        (None, _) => Ok(version),
        (Some(d), Some(value)) if is_sha1_hex_of(d.as_bytes(), value) => Ok(version),
        (Some(_), _) => Ok(0),
    }
}

/// Whether `hex` is the lowercase hex SHA-1 of `value` (as `Sha1::digest` prints
/// it), compared without building the text: the module's filter asks it per read.
fn is_sha1_hex_of(hex: &[u8], value: &[u8]) -> bool {
    let digit = |n: u8| if n < 10 { b'0' + n } else { b'a' + n - 10 };
    let digest = sha1_smol::Sha1::from(value).digest().bytes();
    hex.len() == 2 * digest.len()
        && hex
            .chunks_exact(2)
            .zip(digest)
            .all(|(pair, byte)| pair == [digit(byte >> 4), digit(byte & 15)])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_compared_as_its_hex_text() {
        for value in [&b""[..], b"xxx", &[0xff; 100]] {
            let hex = sha1_smol::Sha1::from(value).digest().to_string();
            assert!(is_sha1_hex_of(hex.as_bytes(), value));
            assert!(!is_sha1_hex_of(&hex.as_bytes()[1..], value));
            assert!(!is_sha1_hex_of(hex.as_bytes(), b"other"));
        }
    }

    #[test]
    fn names_keys_as_the_store_does() {
        let w = Wire::from_url("redis://127.0.0.1/?prefix=app&set=tags&kinds=a:b").unwrap();
        assert_eq!(w.state_key(), "app:__tern:meta:state");
        assert_eq!(w.kind_of("app:user:7"), Some("user"));
        assert_eq!(w.kind_of("app:a:b:7"), Some("a:b"));
        assert_eq!(w.kind_of("app:__tern:v:{app:tags:1}"), None);
        assert_eq!(w.kind_of("other:user:7"), None);
        assert_eq!(w.layout("tags"), KindLayout::Set);
        assert_eq!(w.version_key("app:tags:1"), "app:__tern:v:{app:tags:1}");
        let key = w.parse_entity_key("user", "app:user:7").unwrap();
        let e = w
            .decode_hash(
                key,
                vec![("n".into(), "5".into()), ("_v".into(), "2".into())],
            )
            .unwrap()
            .unwrap();
        assert_eq!(e.version, 2);
        assert_eq!(w.encode_hash(&e).unwrap(), vec!["n", "5", "_v", "2"]);
    }

    #[test]
    fn a_string_tag_names_its_value() {
        let tag = container_tag(KindLayout::Text, 3, b"abc");
        // As Lua's redis.sha1hex("abc").
        assert_eq!(tag, "3:a9993e364706816aba3e25717850c26c9cd0d89d");
        let t = KindLayout::Text;
        assert_eq!(
            tag_version(t, Some(tag.as_bytes()), Some(b"abc")).unwrap(),
            3
        );
        assert_eq!(
            tag_version(t, Some(tag.as_bytes()), Some(b"zzzz")).unwrap(),
            0
        );
        assert_eq!(tag_version(t, Some(b"3"), Some(b"zzzz")).unwrap(), 3);
        assert_eq!(tag_version(t, None, Some(b"abc")).unwrap(), 0);
        assert_eq!(container_tag(KindLayout::Set, 3, b""), "3");
        assert!(tag_version(KindLayout::Set, Some(b"3:x"), None).is_err());
    }
}
