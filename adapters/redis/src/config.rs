//! The store URL and what it configures.

use std::collections::BTreeSet;

use tern_core::store::{Error, ErrorKind, Result, url};

/// The URL scheme of this adapter.
pub const REDIS_SCHEME: &str = "redis";

/// How the entities of one kind are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindLayout {
    /// A Redis hash: one field per top-level property, plus the version field.
    Hash,
    /// A Redis string holding tern's JSON of the map, with the version field in it.
    Json,
}

/// The parsed configuration of a Redis store.
///
/// `redis://[user:pass@]host:port[/db][?prefix=ns&sep=:&json=kind1,kind2&version_field=_v]`
/// (`json=*`: every kind is a JSON string).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisConfig {
    /// The connection URL handed to the driver (without tern's query options).
    pub(crate) connection: String,
    /// The URL for messages: password masked.
    pub redacted: String,
    /// The namespace prefix (`ns` in `ns:kind:id`), if any.
    pub prefix: Option<String>,
    /// The separator between namespace, kind and id (default `:`).
    pub separator: String,
    /// Kinds stored as JSON strings; every other kind is a hash.
    pub json_kinds: BTreeSet<String>,
    /// Every kind is stored as a JSON string (`json=*`).
    pub json_all: bool,
    /// The name of the version field (default `_v`).
    pub version_field: String,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the connection string: it may hold a password.
        f.debug_struct("RedisConfig")
            .field("url", &self.redacted)
            .field("prefix", &self.prefix)
            .field("separator", &self.separator)
            .field("json_kinds", &self.json_kinds)
            .field("json_all", &self.json_all)
            .field("version_field", &self.version_field)
            .finish()
    }
}

impl RedisConfig {
    /// Parses a store URL.
    ///
    /// # Errors
    /// [`ErrorKind::ConfigInvalid`] for another scheme, an unknown option, or an
    /// empty separator.
    pub fn from_url(store_url: &str) -> Result<Self, Error> {
        let redacted = url::redact(store_url);
        let invalid = |message: String| {
            Error::new(ErrorKind::ConfigInvalid, message).with_context("url", redacted.clone())
        };
        match url::scheme(store_url).as_deref() {
            Some("redis") => {}
            _ => {
                return Err(invalid("a Redis store URL starts with redis://".to_owned()));
            }
        }
        let (connection, query) = match store_url.split_once('?') {
            Some((c, q)) => (c.to_owned(), q),
            None => (store_url.to_owned(), ""),
        };
        let mut config = RedisConfig {
            connection,
            redacted: url::redact(store_url),
            prefix: None,
            separator: ":".to_owned(),
            json_kinds: BTreeSet::new(),
            json_all: false,
            version_field: tern_core::model::DEFAULT_VERSION_PROPERTY.to_owned(),
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "prefix" | "namespace" => {
                    config.prefix = (!value.is_empty()).then(|| value.to_owned());
                }
                "sep" | "separator" => config.separator = value.to_owned(),
                "json" => {
                    for kind in value.split(',').filter(|k| !k.is_empty()) {
                        if kind == "*" {
                            config.json_all = true;
                        } else {
                            config.json_kinds.insert(kind.to_owned());
                        }
                    }
                }
                "version_field" => config.version_field = value.to_owned(),
                other => {
                    return Err(invalid(format!(
                        "unknown option {other:?}; known: prefix, sep, json, version_field"
                    )));
                }
            }
        }
        if config.separator.is_empty() {
            return Err(invalid("the separator (sep=) must not be empty".to_owned()));
        }
        if config.version_field.is_empty() {
            return Err(invalid("version_field must not be empty".to_owned()));
        }
        Ok(config)
    }

    /// The layout of `kind`.
    pub fn layout(&self, kind: &str) -> KindLayout {
        if self.json_all || self.json_kinds.contains(kind) {
            KindLayout::Json
        } else {
            KindLayout::Hash
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn options_are_parsed_and_stripped() {
        let c =
            RedisConfig::from_url("redis://:pw@127.0.0.1:6379/2?prefix=ns&json=a,b&sep=/").unwrap();
        assert_eq!(c.connection, "redis://:pw@127.0.0.1:6379/2");
        assert_eq!(c.prefix.as_deref(), Some("ns"));
        assert_eq!(c.separator, "/");
        assert_eq!(c.layout("a"), KindLayout::Json);
        assert_eq!(c.layout("c"), KindLayout::Hash);
        assert!(!format!("{c:?}").contains("pw"));
    }

    #[test]
    fn bad_urls_are_config_errors_without_password() {
        let e = RedisConfig::from_url("redis://:pw@127.0.0.1/?bogus=1").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConfigInvalid);
        assert!(!e.to_string().contains("pw"));
        assert!(RedisConfig::from_url("mongodb://h").is_err());
    }
}
