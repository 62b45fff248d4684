//! The store URL and what it configures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use tern_core::store::{Error, ErrorKind, Result, url};

/// The options of a Redis store URL's query.
const OPTIONS: &[&str] = &[
    "prefix",
    "sep",
    "json",
    "string",
    "set",
    "list",
    "zset",
    "kinds",
    "version_field",
    "cluster",
    "id_tag",
    "tls_ca_file",
    "tls_cert_file",
    "tls_key_file",
    "response_timeout",
    "connect_timeout",
];

/// How long a command may take before the client gives up on its answer, unless
/// the URL says otherwise (`response_timeout=`): sized for the work, not for a
/// ping. A migration of a big container is one script (a 200,000-field hash ran
/// 0.3-2.4 s), and the driver's own default (500 ms) reported such applied
/// migrations as failed connections.
pub(crate) const DEFAULT_RESPONSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long connecting may take unless the URL says otherwise (`connect_timeout=`).
pub(crate) const DEFAULT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A duration option: milliseconds, or a number with `ms`, `s` or `m`.
fn duration(text: &str) -> Option<std::time::Duration> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => text.split_at(i),
        None => (text, "ms"),
    };
    let n: u64 = number.parse().ok()?;
    let ms = match unit {
        "ms" => n,
        "s" => n.checked_mul(1000)?,
        "m" => n.checked_mul(60_000)?,
        _ => return None,
    };
    Some(std::time::Duration::from_millis(ms))
}

/// The URL scheme of this adapter.
pub const REDIS_SCHEME: &str = "redis";

/// How the entities of one kind are stored (the Redis type of their keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum KindLayout {
    /// A Redis hash: one field per top-level property, plus the version field.
    Hash,
    /// A Redis string holding tern's JSON of the map, with the version field in it.
    Json,
    /// A plain Redis string (`?string=`): the entity `{value: <text or bytes>}`.
    Text,
    /// A Redis set (`?set=`): the entity `{members: [...]}`, members in byte order.
    Set,
    /// A Redis list (`?list=`): the entity `{items: [...]}`, in list order.
    List,
    /// A Redis sorted set (`?zset=`): the entity `{members: [[member, score], ...]}`,
    /// in score order.
    SortedSet,
}

impl KindLayout {
    /// The option of the store URL that declares this layout.
    pub fn option(self) -> &'static str {
        match self {
            KindLayout::Hash => "hash",
            KindLayout::Json => "json",
            KindLayout::Text => "string",
            KindLayout::Set => "set",
            KindLayout::List => "list",
            KindLayout::SortedSet => "zset",
        }
    }

    /// The Redis type name of the keys (as `TYPE` and `SCAN ... TYPE` name it).
    pub fn type_name(self) -> &'static str {
        match self {
            KindLayout::Hash => "hash",
            KindLayout::Json | KindLayout::Text => "string",
            KindLayout::Set => "set",
            KindLayout::List => "list",
            KindLayout::SortedSet => "zset",
        }
    }

    /// A container whose version tag lives in a companion key (every layout
    /// but hashes and JSON strings, which hold it in the value).
    pub fn tag_in_companion(self) -> bool {
        !matches!(self, KindLayout::Hash | KindLayout::Json)
    }

    /// The one-letter code of the layout in the write and read scripts.
    pub(crate) fn code(self) -> &'static str {
        match self {
            KindLayout::Hash => "h",
            KindLayout::Json => "j",
            KindLayout::Text => "t",
            KindLayout::Set => "s",
            KindLayout::List => "l",
            KindLayout::SortedSet => "z",
        }
    }
}

/// The TLS files of a `rediss://` URL (options `tls_ca_file`,
/// `tls_cert_file`, `tls_key_file`; PEM files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate(s) the server's certificate must chain to; without
    /// it, the system's trusted roots.
    pub ca_file: Option<PathBuf>,
    /// The client certificate, for a server that asks for one
    /// (`tls-auth-clients yes`, Redis's default).
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key.
    pub key_file: Option<PathBuf>,
}

/// The parsed configuration of a Redis store.
///
/// `redis://[user:pass@]host:port[/db][?prefix=ns&sep=:&json=kind1,kind2&version_field=_v]`
/// (`json=*`: every kind is a JSON string); `rediss://` for TLS, with
/// `tls_ca_file=`, `tls_cert_file=` and `tls_key_file=` (see [`TlsFiles`]); `string=`, `set=`, `list=`, `zset=`
/// declare kinds of the other Redis types; `kinds=a:b,c:d` declares kinds whose
/// names hold the separator (prefix hierarchies; any kind named in a layout
/// option is declared too); `cluster=1` for a Redis Cluster; `id_tag=1` writes
/// each id as a hash tag (`ns:kind:{id}`).
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
    /// The layout of each kind named in a layout option (`json=`, `set=`...);
    /// every other kind is a hash (or a JSON string with `json=*`).
    pub layouts: BTreeMap<String, KindLayout>,
    /// The declared kinds: named in `kinds=` or in a layout option. The kind of
    /// a key is the longest declared kind it starts with (then the separator),
    /// or else its first segment.
    pub declared: BTreeSet<String>,
    /// Every kind is stored as a JSON string (`json=*`).
    pub json_all: bool,
    /// The name of the version field (default `_v`).
    pub version_field: String,
    /// The server is a node of a Redis Cluster (`?cluster=1`): the driver's
    /// cluster client, SCAN on every master.
    pub cluster: bool,
    /// Each id is written as a hash tag (`?id_tag=1`): keys `ns:kind:{id}`.
    /// The keys of one id under every kind name then lie in one cluster slot,
    /// so a lazy kind rename can move an entity in one script on a cluster.
    pub id_tag: bool,
    /// TLS (`rediss://`), with its files; `None` for `redis://`.
    pub tls: Option<TlsFiles>,
    /// How long to wait for a command's answer (`?response_timeout=`, in
    /// milliseconds or with a unit: `90s`, `2m`; `0`: wait as long as it
    /// takes). Default 60 s: a migration of a big container is one script.
    pub response_timeout: Option<std::time::Duration>,
    /// How long connecting may take (`?connect_timeout=`, as above; default 5 s).
    pub connect_timeout: std::time::Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the connection string: it may hold a password.
        f.debug_struct("RedisConfig")
            .field("url", &self.redacted)
            .field("prefix", &self.prefix)
            .field("separator", &self.separator)
            .field("layouts", &self.layouts)
            .field("declared", &self.declared)
            .field("json_all", &self.json_all)
            .field("version_field", &self.version_field)
            .field("cluster", &self.cluster)
            .field("id_tag", &self.id_tag)
            .field("tls", &self.tls)
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
        let tls = match url::scheme(store_url).as_deref() {
            Some("redis") => false,
            Some("rediss") => true,
            _ => {
                return Err(invalid(
                    "a Redis store URL starts with redis:// (or rediss:// for TLS)".to_owned(),
                ));
            }
        };
        let (connection, query) = match store_url.split_once('?') {
            Some((c, q)) => (c.to_owned(), q),
            None => (store_url.to_owned(), ""),
        };
        let mut config = RedisConfig {
            connection,
            redacted: url::redact(store_url),
            prefix: None,
            separator: ":".to_owned(),
            layouts: BTreeMap::new(),
            declared: BTreeSet::new(),
            json_all: false,
            version_field: tern_core::model::DEFAULT_VERSION_PROPERTY.to_owned(),
            cluster: false,
            id_tag: false,
            tls: tls.then(TlsFiles::default),
            response_timeout: Some(DEFAULT_RESPONSE_TIMEOUT),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        };
        let mut tls_files = TlsFiles::default();
        for (name, value) in url::query_pairs(query) {
            match name {
                "prefix" | "namespace" => {
                    config.prefix = (!value.is_empty()).then(|| value.to_owned());
                }
                "sep" | "separator" => config.separator = value.to_owned(),
                "json" | "string" | "set" | "list" | "zset" => {
                    let layout = match name {
                        "json" => KindLayout::Json,
                        "string" => KindLayout::Text,
                        "set" => KindLayout::Set,
                        "list" => KindLayout::List,
                        _ => KindLayout::SortedSet,
                    };
                    for kind in value.split(',').filter(|k| !k.is_empty()) {
                        if kind == "*" && layout == KindLayout::Json {
                            config.json_all = true;
                            continue;
                        }
                        if let Some(other) = config.layouts.insert(kind.to_owned(), layout)
                            && other != layout
                        {
                            return Err(invalid(format!(
                                "kind {kind:?} is named in both {}= and {}=; name it in one",
                                other.option(),
                                layout.option()
                            )));
                        }
                        config.declared.insert(kind.to_owned());
                    }
                }
                "kinds" => {
                    config.declared.extend(
                        value
                            .split(',')
                            .filter(|k| !k.is_empty())
                            .map(str::to_owned),
                    );
                }
                "version_field" => config.version_field = value.to_owned(),
                "cluster" | "id_tag" => {
                    let Some(on) = (value.is_empty()).then_some(true).or(url::flag(value)) else {
                        return Err(invalid(format!(
                            "{name}={value:?}: write {name}=1 or {name}=0"
                        )));
                    };
                    if name == "cluster" {
                        config.cluster = on;
                    } else {
                        config.id_tag = on;
                    }
                }
                "response_timeout" | "connect_timeout" => {
                    let Some(d) = duration(value) else {
                        return Err(invalid(format!(
                            "{name}={value:?} is not a duration: write milliseconds \
                             ({name}=60000) or a number with a unit (ms, s, m: {name}=60s)"
                        )));
                    };
                    if name == "response_timeout" {
                        config.response_timeout = (!d.is_zero()).then_some(d);
                    } else if d.is_zero() {
                        return Err(invalid(
                            "connect_timeout=0: give the time connecting may take".to_owned(),
                        ));
                    } else {
                        config.connect_timeout = d;
                    }
                }
                "tls_ca_file" | "tls_cert_file" | "tls_key_file" => {
                    if value.is_empty() {
                        return Err(invalid(format!("{name}= names no file")));
                    }
                    let path = Some(PathBuf::from(tern_core::store::url::percent_decode(value)));
                    match name {
                        "tls_ca_file" => tls_files.ca_file = path,
                        "tls_cert_file" => tls_files.cert_file = path,
                        _ => tls_files.key_file = path,
                    }
                }
                other => return Err(invalid(url::unknown_option(other, OPTIONS))),
            }
        }
        if tls_files != TlsFiles::default() {
            if !tls {
                return Err(invalid(
                    "the TLS options (tls_ca_file, tls_cert_file, tls_key_file) need a rediss:// URL"
                        .to_owned(),
                ));
            }
            if tls_files.cert_file.is_some() != tls_files.key_file.is_some() {
                return Err(invalid(
                    "a client certificate needs its key: give tls_cert_file and tls_key_file together"
                        .to_owned(),
                ));
            }
            config.tls = Some(tls_files);
        }
        if config.separator.is_empty() {
            return Err(invalid("the separator (sep=) must not be empty".to_owned()));
        }
        if config.version_field.is_empty() {
            return Err(invalid("version_field must not be empty".to_owned()));
        }
        Ok(config)
    }

    /// The response timeout as the URL option would write it (for messages).
    pub fn response_timeout_text(&self) -> String {
        match self.response_timeout {
            Some(d) => format!("response_timeout={}ms", d.as_millis()),
            None => "response_timeout=0 (none)".to_owned(),
        }
    }

    /// The layout of `kind`.
    pub fn layout(&self, kind: &str) -> KindLayout {
        match self.layouts.get(kind) {
            Some(layout) => *layout,
            None if self.json_all => KindLayout::Json,
            None => KindLayout::Hash,
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
        let both = RedisConfig::from_url("redis://127.0.0.1/?set=a&list=a").unwrap_err();
        assert!(both.to_string().contains("set= and list="), "{both}");
    }

    #[test]
    fn rediss_takes_tls_files() {
        let c = RedisConfig::from_url(
            "rediss://app:pw@h:6380/0?prefix=x&tls_ca_file=%2Fetc%2Fca%20file.pem&tls_cert_file=c.pem&tls_key_file=k.pem",
        )
        .unwrap();
        assert_eq!(c.connection, "rediss://app:pw@h:6380/0");
        let tls = c.tls.clone().unwrap();
        assert_eq!(tls.ca_file, Some(PathBuf::from("/etc/ca file.pem")));
        assert_eq!(tls.cert_file, Some(PathBuf::from("c.pem")));
        assert_eq!(tls.key_file, Some(PathBuf::from("k.pem")));
        assert!(!format!("{c:?}").contains("pw"));
        assert_eq!(
            RedisConfig::from_url("rediss://h").unwrap().tls,
            Some(TlsFiles::default())
        );
        assert_eq!(RedisConfig::from_url("redis://h").unwrap().tls, None);
        for (bad, says) in [
            ("redis://:pw@h/?tls_ca_file=ca.pem", "need a rediss:// URL"),
            ("rediss://:pw@h/?tls_cert_file=c.pem", "together"),
            ("rediss://:pw@h/?tls_key_file=k.pem", "together"),
            ("rediss://:pw@h/?tls_ca_file=", "names no file"),
        ] {
            let e = RedisConfig::from_url(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConfigInvalid);
            assert!(e.to_string().contains(says), "{bad}: {e}");
            assert!(!e.to_string().contains("pw"), "{e}");
        }
    }

    #[test]
    fn id_tag_is_a_switch() {
        assert!(
            RedisConfig::from_url("redis://127.0.0.1/?id_tag=1")
                .unwrap()
                .id_tag
        );
        assert!(
            !RedisConfig::from_url("redis://127.0.0.1/?id_tag=0")
                .unwrap()
                .id_tag
        );
        assert!(!RedisConfig::from_url("redis://127.0.0.1/").unwrap().id_tag);
        let e = RedisConfig::from_url("redis://127.0.0.1/?id_tag=maybe").unwrap_err();
        assert!(e.to_string().contains("id_tag=1 or id_tag=0"), "{e}");
    }

    #[test]
    fn layouts_and_declared_kinds() {
        let c = RedisConfig::from_url(
            "redis://127.0.0.1/?zset=amico:followers,amico:following&set=s&list=l&string=t&kinds=skx:INODE",
        )
        .unwrap();
        assert_eq!(c.layout("amico:followers"), KindLayout::SortedSet);
        assert_eq!(c.layout("s"), KindLayout::Set);
        assert_eq!(c.layout("l"), KindLayout::List);
        assert_eq!(c.layout("t"), KindLayout::Text);
        assert_eq!(c.layout("skx:INODE"), KindLayout::Hash);
        assert!(c.declared.contains("skx:INODE") && c.declared.contains("amico:following"));
    }
}
