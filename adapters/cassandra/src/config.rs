//! The adapter's configuration, read from the store URL.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use tern_core::store::{Error, ErrorKind, Result, url};

/// The URL scheme of this adapter (`scylla://` is accepted as a synonym).
pub const CASSANDRA_SCHEME: &str = "cassandra";

/// Whether to wait for schema agreement after tern's DDL (`CREATE TABLE`, `CREATE KEYSPACE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaAgreement {
    /// Wait when the cluster can report it (it has `system.peers`); skip on a server that cannot
    /// (a server without `system.peers`). Decided once, when the store is opened.
    Auto,
    /// Always wait; a failure to agree is an error.
    Wait,
    /// Never wait (single-node clusters only).
    Skip,
}

/// The consistency of reads and writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsistencyLevel {
    /// `ONE`
    One,
    /// `LOCAL_ONE`
    LocalOne,
    /// `QUORUM`
    Quorum,
    /// `LOCAL_QUORUM` (the default)
    LocalQuorum,
    /// `ALL`
    All,
}

/// The serial consistency of lightweight transactions (compare-and-set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SerialLevel {
    /// `SERIAL`: linearizable across every datacenter (the default: tern's lease and
    /// compare-and-set must hold cluster-wide).
    Serial,
    /// `LOCAL_SERIAL`: linearizable within the local datacenter only.
    LocalSerial,
}

/// Which kinds are tables of the native layout (one column per property) rather than tern's
/// document layout.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NativeTables {
    /// None: every kind is a document table (the default).
    #[default]
    None,
    /// These tables (`native=t1,t2`).
    Tables(Vec<String>),
    /// Every existing table tern did not create (`native=*`); kinds without a table still
    /// get a document table.
    All,
}

impl NativeTables {
    /// Whether `table` is named native (`All` is decided per table by the store).
    pub fn names(&self, table: &str) -> bool {
        match self {
            NativeTables::None => false,
            NativeTables::Tables(t) => t.iter().any(|n| n == table),
            NativeTables::All => true,
        }
    }
}

/// TLS to the cluster (`tls=true`, or any of the files): the files are PEM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CassTls {
    /// The CA certificate(s) the nodes' certificates must chain to
    /// (`tls_ca_file`); without it, the system's trusted roots.
    pub ca_file: Option<PathBuf>,
    /// The client certificate (`tls_cert_file`), for nodes that require one
    /// (`require_client_auth: true`).
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (`tls_key_file`).
    pub key_file: Option<PathBuf>,
}

/// Everything `cassandra://host:port[,host:port...]/keyspace?options` says.
///
/// Options: `replication_factor=N` (SimpleStrategy, default 1) or `replication=<CQL map>`
/// (e.g. `{'class':'NetworkTopologyStrategy','dc1':3}`), `schema_agreement=auto|wait|skip`,
/// `consistency=one|local_one|quorum|local_quorum|all`, `serial=serial|local_serial`,
/// `concurrency=N` (parallel writes per batch, default 32), `timeout_ms=N` (per request,
/// default 12000), `user=` / `password=` (or `user:password@` in the authority),
/// `native=t1,t2` or `native=*` (tables of the native layout, see [`NativeTables`]),
/// `drop_columns=true|false` (drop columns a migration emptied, default true),
/// `tls=true` and `tls_ca_file=`, `tls_cert_file=`, `tls_key_file=` (TLS, see [`CassTls`]).
#[derive(Clone, PartialEq, Eq)]
pub struct CassConfig {
    /// `host:port` of each contact point.
    pub nodes: Vec<String>,
    /// The keyspace holding tern's tables (created when missing).
    pub keyspace: String,
    /// The replication map used when the keyspace is created (CQL text).
    pub replication: String,
    /// Schema agreement after DDL.
    pub schema_agreement: SchemaAgreement,
    /// Consistency of reads and writes.
    pub consistency: ConsistencyLevel,
    /// Serial consistency of compare-and-set.
    pub serial: SerialLevel,
    /// How many writes of a batch run at once.
    pub concurrency: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// User name, if the cluster needs authentication.
    pub user: Option<String>,
    /// Which kinds use the native layout.
    pub native: NativeTables,
    /// Whether the native layout drops the columns a migration emptied (after its census).
    pub drop_columns: bool,
    password: Option<String>,
    /// The URL without its password, for messages.
    pub shown: String,
    /// TLS, if asked for.
    pub tls: Option<CassTls>,
}

impl fmt::Debug for CassConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Hand-written: never shows the password.
        f.debug_struct("CassConfig")
            .field("nodes", &self.nodes)
            .field("keyspace", &self.keyspace)
            .field("replication", &self.replication)
            .field("schema_agreement", &self.schema_agreement)
            .field("consistency", &self.consistency)
            .field("serial", &self.serial)
            .field("concurrency", &self.concurrency)
            .field("timeout", &self.timeout)
            .field("user", &self.user)
            .field("native", &self.native)
            .field("drop_columns", &self.drop_columns)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

fn invalid(shown: &str, message: impl fmt::Display) -> Error {
    Error::new(
        ErrorKind::ConfigInvalid,
        format!("store URL {shown}: {message}"),
    )
}

/// Whether `name` is a valid unquoted CQL identifier tern uses (lowercase letter, then
/// lowercase letters, digits and `_`; at most 48 characters).
pub(crate) fn is_plain_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some('a'..='z'))
        && name.len() <= 48
        && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

/// What the authority and path of a store URL name.
struct Location {
    user: Option<String>,
    password: Option<String>,
    nodes: Vec<String>,
    keyspace: String,
}

/// Reads `[user[:password]@]host[:port][,host...]/keyspace`.
fn location(shown: &str, rest: &str) -> Result<Location> {
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let mut user = None;
    let mut password = None;
    if let Some(info) = userinfo {
        let (u, p) = info.split_once(':').unwrap_or((info, ""));
        user = Some(tern_core::store::url::percent_decode(u));
        if !p.is_empty() {
            password = Some(tern_core::store::url::percent_decode(p));
        }
    }
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| {
            if h.rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
            {
                h.to_owned()
            } else {
                format!("{h}:9042")
            }
        })
        .collect();
    if nodes.is_empty() {
        return Err(invalid(
            shown,
            "no host; expected cassandra://HOST:PORT/KEYSPACE",
        ));
    }
    let keyspace = path.trim_end_matches('/').to_owned();
    if !is_plain_identifier(&keyspace) {
        return Err(invalid(
            shown,
            format!(
                "keyspace {keyspace:?} must be a lowercase letter followed by lowercase \
                 letters, digits or _ (at most 48)"
            ),
        ));
    }
    Ok(Location {
        user,
        password,
        nodes,
        keyspace,
    })
}

fn schema_agreement(shown: &str, value: &str) -> Result<SchemaAgreement> {
    match value {
        "auto" => Ok(SchemaAgreement::Auto),
        "wait" => Ok(SchemaAgreement::Wait),
        "skip" => Ok(SchemaAgreement::Skip),
        _ => Err(invalid(shown, "schema_agreement is auto, wait or skip")),
    }
}

fn consistency(shown: &str, value: &str) -> Result<ConsistencyLevel> {
    match value.to_ascii_lowercase().as_str() {
        "one" => Ok(ConsistencyLevel::One),
        "local_one" => Ok(ConsistencyLevel::LocalOne),
        "quorum" => Ok(ConsistencyLevel::Quorum),
        "local_quorum" => Ok(ConsistencyLevel::LocalQuorum),
        "all" => Ok(ConsistencyLevel::All),
        _ => Err(invalid(
            shown,
            "consistency is one, local_one, quorum, local_quorum or all",
        )),
    }
}

fn serial(shown: &str, value: &str) -> Result<SerialLevel> {
    match value.to_ascii_lowercase().as_str() {
        "serial" => Ok(SerialLevel::Serial),
        "local_serial" => Ok(SerialLevel::LocalSerial),
        _ => Err(invalid(shown, "serial is serial or local_serial")),
    }
}

fn native_tables(shown: &str, value: &str) -> Result<NativeTables> {
    if value == "*" {
        return Ok(NativeTables::All);
    }
    let tables: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(bad) = tables.iter().find(|t| !is_plain_identifier(t)) {
        return Err(invalid(
            shown,
            format!(
                "native: table {bad:?} must be a lowercase letter followed by \
                 lowercase letters, digits or _ (or native=* for every table)"
            ),
        ));
    }
    Ok(NativeTables::Tables(tables))
}

fn drop_columns(shown: &str, value: &str) -> Result<bool> {
    url::flag(value).ok_or_else(|| invalid(shown, "drop_columns is true or false"))
}

/// The options of a Cassandra store URL's query.
const OPTIONS: &[&str] = &[
    "replication_factor",
    "replication",
    "schema_agreement",
    "consistency",
    "serial",
    "concurrency",
    "timeout_ms",
    "native",
    "drop_columns",
    "user",
    "password",
    "tls",
    "tls_ca_file",
    "tls_cert_file",
    "tls_key_file",
];

impl CassConfig {
    /// Reads a `cassandra://` (or `scylla://`) URL.
    ///
    /// # Errors
    /// [`ErrorKind::ConfigInvalid`] naming the problem (never the password).
    pub fn from_url(store_url: &str) -> Result<CassConfig> {
        let shown = url::redact(store_url);
        let rest = store_url
            .split_once("://")
            .filter(|(scheme, _)| {
                scheme.eq_ignore_ascii_case("cassandra") || scheme.eq_ignore_ascii_case("scylla")
            })
            .map(|(_, rest)| rest)
            .ok_or_else(|| invalid(&shown, "expected cassandra://HOST:PORT/KEYSPACE"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let Location {
            user,
            password,
            nodes,
            keyspace,
        } = location(&shown, rest)?;
        let mut config = CassConfig {
            nodes,
            keyspace,
            replication: simple_strategy(1),
            schema_agreement: SchemaAgreement::Auto,
            consistency: ConsistencyLevel::LocalQuorum,
            serial: SerialLevel::Serial,
            concurrency: 32,
            timeout: Duration::from_secs(12),
            user,
            native: NativeTables::None,
            drop_columns: true,
            password,
            shown: shown.clone(),
            tls: None,
        };
        for (key, value) in url::query_pairs(query) {
            config.set_option(key, url::percent_decode(value))?;
        }
        if let Some(tls) = &config.tls
            && tls.cert_file.is_some() != tls.key_file.is_some()
        {
            return Err(invalid(
                &shown,
                "a client certificate needs its key: give tls_cert_file and tls_key_file together",
            ));
        }
        Ok(config)
    }

    /// Sets the URL option `key` to its (decoded) `value`.
    fn set_option(&mut self, key: &str, value: String) -> Result<()> {
        let shown = &self.shown.clone();
        let number = |what: &str| {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid(shown, format!("{what} must be a positive integer")))
        };
        match key {
            "replication_factor" => {
                self.replication = simple_strategy(number("replication_factor")?);
            }
            "replication" => {
                if !(value.starts_with('{') && value.ends_with('}')) || value.contains(';') {
                    return Err(invalid(shown, "replication must be a CQL map {...}"));
                }
                self.replication = value;
            }
            "schema_agreement" => self.schema_agreement = schema_agreement(shown, &value)?,
            "consistency" => self.consistency = consistency(shown, &value)?,
            "serial" => self.serial = serial(shown, &value)?,
            "concurrency" => {
                self.concurrency = usize::try_from(number("concurrency")?).unwrap_or(32);
            }
            "timeout_ms" => self.timeout = Duration::from_millis(number("timeout_ms")?),
            "native" => self.native = native_tables(shown, &value)?,
            "drop_columns" => self.drop_columns = drop_columns(shown, &value)?,
            "user" | "username" => self.user = Some(value),
            "password" => self.password = Some(value),
            "tls" => match url::flag(&value) {
                Some(true) => {
                    self.tls.get_or_insert_with(CassTls::default);
                }
                Some(false) if self.tls.as_ref().is_none_or(|t| *t == CassTls::default()) => {
                    self.tls = None;
                }
                Some(false) => {
                    return Err(invalid(shown, "tls=false with TLS files; remove one"));
                }
                None => return Err(invalid(shown, "tls is true or false")),
            },
            "tls_ca_file" | "tls_cert_file" | "tls_key_file" => {
                if value.is_empty() {
                    return Err(invalid(shown, format!("{key}= names no file")));
                }
                let tls = self.tls.get_or_insert_with(CassTls::default);
                let path = Some(PathBuf::from(value));
                match key {
                    "tls_ca_file" => tls.ca_file = path,
                    "tls_cert_file" => tls.cert_file = path,
                    _ => tls.key_file = path,
                }
            }
            other => return Err(invalid(shown, url::unknown_option(other, OPTIONS))),
        }
        Ok(())
    }

    /// The password, if any (for the driver only; never printed).
    pub(crate) fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }
}

fn simple_strategy(rf: u64) -> String {
    format!("{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_urls() {
        let c = CassConfig::from_url("cassandra://127.0.0.1:9042/tern").unwrap();
        assert_eq!(c.nodes, ["127.0.0.1:9042"]);
        assert_eq!(c.keyspace, "tern");
        assert_eq!(c.schema_agreement, SchemaAgreement::Auto);
        assert!(c.replication.contains("'replication_factor': 1"));

        let c = CassConfig::from_url(
            "scylla://app:s3cr%40t@h1,h2:9043/ks?replication_factor=3&schema_agreement=wait\
             &consistency=quorum&serial=local_serial&concurrency=8&timeout_ms=500",
        )
        .unwrap();
        assert_eq!(c.nodes, ["h1:9042", "h2:9043"]);
        assert_eq!(c.user.as_deref(), Some("app"));
        assert_eq!(c.password(), Some("s3cr@t"));
        assert_eq!(c.consistency, ConsistencyLevel::Quorum);
        assert_eq!(c.serial, SerialLevel::LocalSerial);
        assert_eq!(c.concurrency, 8);
        assert_eq!(c.timeout, Duration::from_millis(500));
        assert!(!format!("{c:?}").contains("s3cr"));
        assert!(!c.shown.contains("s3cr"));
        assert_eq!(c.native, NativeTables::None);
        assert!(c.drop_columns);

        let c = CassConfig::from_url("cassandra://h/ks?native=users,%20posts&drop_columns=false")
            .unwrap();
        assert_eq!(
            c.native,
            NativeTables::Tables(vec!["users".into(), "posts".into()])
        );
        assert!(c.native.names("posts") && !c.native.names("other"));
        assert!(!c.drop_columns);
        let c = CassConfig::from_url("cassandra://h/ks?native=*").unwrap();
        assert_eq!(c.native, NativeTables::All);
    }

    #[test]
    fn reads_tls_options() {
        let c = CassConfig::from_url("cassandra://u:secret@h/ks?tls=true").unwrap();
        assert_eq!(c.tls, Some(CassTls::default()));
        assert_eq!(CassConfig::from_url("cassandra://h/ks").unwrap().tls, None);
        let c = CassConfig::from_url(
            "cassandra://u:secret@h/ks?tls_ca_file=%2Fa%20b%2Fca.pem&tls_cert_file=c.pem&tls_key_file=k.pem",
        )
        .unwrap();
        let tls = c.tls.clone().unwrap();
        assert_eq!(tls.ca_file, Some(PathBuf::from("/a b/ca.pem")));
        assert_eq!(tls.cert_file, Some(PathBuf::from("c.pem")));
        assert_eq!(tls.key_file, Some(PathBuf::from("k.pem")));
        assert!(!format!("{c:?}").contains("secret"));
        for (bad, says) in [
            (
                "cassandra://u:secret@h/ks?tls=maybe",
                "tls is true or false",
            ),
            ("cassandra://u:secret@h/ks?tls_cert_file=c.pem", "together"),
            ("cassandra://u:secret@h/ks?tls_ca_file=", "names no file"),
            (
                "cassandra://u:secret@h/ks?tls_ca_file=ca.pem&tls=false",
                "remove one",
            ),
        ] {
            let err = CassConfig::from_url(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn rejects_bad_urls_without_the_password() {
        for bad in [
            "cassandra://u:secret@h:1/",
            "cassandra://u:secret@h:1/Bad-Name",
            "cassandra://u:secret@/ks",
            "cassandra://u:secret@h/ks?nope=1",
            "cassandra://u:secret@h/ks?concurrency=0",
            "cassandra://u:secret@h/ks?replication={'a':1};DROP",
            "cassandra://u:secret@h/ks?native=Users",
            "cassandra://u:secret@h/ks?drop_columns=maybe",
            "redis://u:secret@h/ks",
        ] {
            let err = CassConfig::from_url(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConfigInvalid, "{bad}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
    }
}
