//! Credentials and TLS files given apart from the store URL: a password
//! that never appears in the process list (`--store-password-file`,
//! `TERN_STORE_PASSWORD`, `password_file` in tern.toml), and the `[tls]`
//! files of tern.toml. Both become options of the store URL in memory only,
//! just before the store is opened.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use tern_core::store::url;

/// The environment variable holding the store's password.
pub const PASSWORD_VAR: &str = "TERN_STORE_PASSWORD";

/// A password given apart from the store URL, and where it came from.
#[derive(Clone)]
pub struct StorePassword {
    value: String,
    /// Where it came from, for messages (`--store-password-file FILE`, ...).
    pub source: String,
}

impl std::fmt::Debug for StorePassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value.
        f.debug_struct("StorePassword")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl StorePassword {
    /// A password from `source` (for tests and embedders).
    pub fn new(value: impl Into<String>, source: impl Into<String>) -> StorePassword {
        StorePassword {
            value: value.into(),
            source: source.into(),
        }
    }
}

/// The `[tls]` section of tern.toml (or `TERN_TLS__*` variables): files that
/// become the store URL's TLS options (see [`with_tls`]).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate(s) to trust (PEM).
    pub ca_file: Option<PathBuf>,
    /// The client certificate (PEM), for servers that ask for one.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    pub key_file: Option<PathBuf>,
}

impl TlsFiles {
    /// Whether no file is given.
    pub fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.cert_file.is_none() && self.key_file.is_none()
    }

    /// The files with relative paths resolved: those of tern.toml against
    /// the project folder, those of a `TERN_TLS__*` variable against the
    /// current folder.
    pub(crate) fn resolved(self, project_dir: &Path) -> TlsFiles {
        let resolve = |path: Option<PathBuf>, var: &str| {
            path.map(|p| {
                if p.is_relative() && std::env::var_os(var).is_none() {
                    project_dir.join(p)
                } else {
                    p
                }
            })
        };
        TlsFiles {
            ca_file: resolve(self.ca_file, "TERN_TLS__CA_FILE"),
            cert_file: resolve(self.cert_file, "TERN_TLS__CERT_FILE"),
            key_file: resolve(self.key_file, "TERN_TLS__KEY_FILE"),
        }
    }
}

/// Warns when the store URL given on the command line holds a password:
/// every user of the machine sees it in the process list.
pub(crate) fn warn_if_password_in(store_url: &str) {
    let shown = url::redact(store_url);
    if shown != store_url {
        tracing::warn!(
            store = %shown,
            "the store URL on the command line holds a password, which every user of this \
             machine can read in the process list; give it with --store-password-file FILE, \
             {PASSWORD_VAR} or password_file in tern.toml instead"
        );
    }
}

/// The password given apart from the URL: `--store-password-file` over
/// `TERN_STORE_PASSWORD` over `password_file` (tern.toml, relative to the
/// project folder, or `TERN_PASSWORD_FILE`, relative to the current folder).
///
/// # Errors
/// An unreadable or empty password file, an empty variable.
pub(crate) fn resolve_password(
    flag_file: Option<&Path>,
    password_file: Option<&Path>,
    project_dir: &Path,
) -> anyhow::Result<Option<StorePassword>> {
    if let Some(file) = flag_file {
        return read_password_file(file, "--store-password-file").map(Some);
    }
    if let Some(value) = std::env::var_os(PASSWORD_VAR) {
        let Some(value) = value.to_str().map(str::to_owned) else {
            bail!("{PASSWORD_VAR} is not valid UTF-8");
        };
        if value.is_empty() {
            bail!("{PASSWORD_VAR} is set but empty; unset it or give the password");
        }
        return Ok(Some(StorePassword::new(value, PASSWORD_VAR)));
    }
    let Some(file) = password_file else {
        return Ok(None);
    };
    if std::env::var_os("TERN_PASSWORD_FILE").is_some() {
        return read_password_file(file, "TERN_PASSWORD_FILE").map(Some);
    }
    let path = if file.is_relative() {
        project_dir.join(file)
    } else {
        file.to_path_buf()
    };
    read_password_file(&path, "password_file in tern.toml").map(Some)
}

/// The password in `file`: its text without the line end(s) after it.
fn read_password_file(file: &Path, given_by: &str) -> anyhow::Result<StorePassword> {
    let text = std::fs::read_to_string(file).with_context(|| {
        format!(
            "cannot read the password file {} (given by {given_by})",
            file.display()
        )
    })?;
    let value = text.trim_end_matches(['\n', '\r']);
    if value.is_empty() {
        bail!(
            "the password file {} (given by {given_by}) is empty",
            file.display()
        );
    }
    warn_if_others_can_read(file);
    Ok(StorePassword::new(
        value,
        format!("{given_by} {}", file.display()),
    ))
}

#[cfg(unix)]
fn warn_if_others_can_read(file: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(file) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            tracing::warn!(
                file = %file.display(),
                mode = format!("{:o}", mode & 0o777),
                "the password file can be read by other users; `chmod 600` it"
            );
        }
    }
}

#[cfg(not(unix))]
fn warn_if_others_can_read(_file: &Path) {}

/// `text` with every byte outside the URL's unreserved characters written
/// as `%XX` (a password or a path inside a URL).
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The parts of `scheme://[userinfo@]hosts[/path][?query]`.
struct Parts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    hosts: &'a str,
    tail: &'a str,
}

fn parts(store_url: &str) -> Option<Parts<'_>> {
    let (scheme, rest) = store_url.split_once("://")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    Some(Parts {
        scheme,
        userinfo,
        hosts,
        tail,
    })
}

/// `store_url` with `password` in it, for the store's driver only (never
/// printed): in the userinfo (`redis://:PASSWORD@` for Redis's default
/// user), or as Cassandra's `password=` option when the user is given by
/// `user=`.
///
/// # Errors
/// A store that takes no password, a URL that has one already, or a
/// MongoDB or Cassandra URL without a user. Messages name the URL without
/// any password.
pub fn with_password(store_url: &str, password: &StorePassword) -> anyhow::Result<String> {
    let shown = url::redact(store_url);
    let scheme = url::scheme(store_url).unwrap_or_default();
    let encoded = percent_encode(&password.value);
    let Some(p) = parts(store_url).filter(|_| {
        matches!(
            scheme.as_str(),
            "redis" | "rediss" | "mongodb" | "mongodb+srv" | "cassandra" | "scylla"
        )
    }) else {
        bail!(
            "the store {shown:?} takes no password, but {} gives one; remove it",
            password.source
        );
    };
    if shown != store_url {
        bail!(
            "the store URL {shown:?} holds a password and {} gives one too; give it in one place",
            password.source
        );
    }
    let user = p.userinfo.map(|u| u.trim_end_matches(':'));
    match (scheme.as_str(), user) {
        (_, Some(user)) if !user.is_empty() => Ok(format!(
            "{}://{user}:{encoded}@{}{}",
            p.scheme, p.hosts, p.tail
        )),
        ("redis" | "rediss", _) => Ok(format!("{}://:{encoded}@{}{}", p.scheme, p.hosts, p.tail)),
        ("cassandra" | "scylla", _) if has_option(store_url, &["user", "username"]) => {
            Ok(with_option(store_url, "password", &encoded))
        }
        _ => bail!(
            "the store URL {shown:?} names no user for the password {} gives; write the user \
             in the URL, e.g. {}://USER@{}{}",
            password.source,
            p.scheme,
            p.hosts,
            p.tail
        ),
    }
}

/// `store_url` without its password, and the password (percent-decoded), when it holds one:
/// in the userinfo (`user:PASSWORD@`, Redis's `:PASSWORD@`) or as a `password=` option. For
/// `tern init --with-store`, which keeps the password out of tern.toml.
pub fn split_password(store_url: &str) -> Option<(String, String)> {
    let p = parts(store_url)?;
    if let Some((user, password)) = p.userinfo.and_then(|u| u.split_once(':'))
        && !password.is_empty()
    {
        let at = if user.is_empty() { "" } else { "@" };
        return Some((
            format!("{}://{user}{at}{}{}", p.scheme, p.hosts, p.tail),
            url::percent_decode(password),
        ));
    }
    let (base, query) = store_url.split_once('?')?;
    let mut password = None;
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| match pair.split_once('=') {
            Some((name, value)) if name.eq_ignore_ascii_case("password") && !value.is_empty() => {
                password = Some(url::percent_decode(value));
                false
            }
            _ => true,
        })
        .collect();
    let password = password?;
    let query = kept.join("&");
    let sep = if query.is_empty() { "" } else { "?" };
    Some((format!("{base}{sep}{query}"), password))
}

/// Whether the query of `store_url` sets one of `names`.
fn has_option(store_url: &str, names: &[&str]) -> bool {
    store_url.split_once('?').is_some_and(|(_, query)| {
        query.split('&').any(|pair| {
            let name = pair.split_once('=').map_or(pair, |(n, _)| n);
            names.iter().any(|n| n.eq_ignore_ascii_case(name))
        })
    })
}

/// `store_url` with `name=value` (`value` already encoded) added to its query.
fn with_option(store_url: &str, name: &str, value: &str) -> String {
    let join = match store_url.split_once('?') {
        Some((_, "")) => "",
        Some(_) => "&",
        None => "?",
    };
    format!("{store_url}{join}{name}={value}")
}

/// `store_url` with the `[tls]` files as its store's TLS options: Redis and
/// Cassandra `tls_ca_file`, `tls_cert_file`, `tls_key_file`; MongoDB
/// `tls=true`, `tlsCAFile`, `tlsCertificateKeyFile` (one file holding the
/// certificate and its key).
///
/// # Errors
/// A store without TLS, an option the URL sets already, a MongoDB key file
/// apart from the certificate.
pub fn with_tls(store_url: &str, tls: &TlsFiles) -> anyhow::Result<String> {
    if tls.is_empty() {
        return Ok(store_url.to_owned());
    }
    let shown = url::redact(store_url);
    let scheme = url::scheme(store_url).unwrap_or_default();
    let path = |p: &PathBuf| percent_encode(&p.to_string_lossy());
    let mut options: Vec<(&str, String)> = Vec::new();
    match scheme.as_str() {
        "redis" | "rediss" | "cassandra" | "scylla" => {
            if let Some(ca) = &tls.ca_file {
                options.push(("tls_ca_file", path(ca)));
            }
            if let Some(cert) = &tls.cert_file {
                options.push(("tls_cert_file", path(cert)));
            }
            if let Some(key) = &tls.key_file {
                options.push(("tls_key_file", path(key)));
            }
        }
        "mongodb" | "mongodb+srv" => {
            if tls.key_file.is_some() && tls.key_file != tls.cert_file {
                bail!(
                    "[tls] key_file: MongoDB takes the client certificate and its key in one PEM \
                     file; give that file as cert_file and leave key_file out"
                );
            }
            if !has_option(store_url, &["tls", "ssl"]) {
                options.push(("tls", "true".to_owned()));
            }
            if let Some(ca) = &tls.ca_file {
                options.push(("tlsCAFile", path(ca)));
            }
            if let Some(cert) = &tls.cert_file {
                options.push(("tlsCertificateKeyFile", path(cert)));
            }
        }
        _ => bail!("the store {shown:?} has no TLS; remove the [tls] settings"),
    }
    let mut out = store_url.to_owned();
    for (name, value) in options {
        if has_option(&out, &[name]) {
            bail!(
                "the store URL {shown:?} sets {name} and the [tls] settings give it too; give it in one place"
            );
        }
        out = with_option(&out, name, &value);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn split_password_takes_the_password_out_of_a_url() {
        let split = split_password;
        assert_eq!(
            split("redis://app:s%40cret@127.0.0.1:6379/0?prefix=x"),
            Some((
                "redis://app@127.0.0.1:6379/0?prefix=x".to_owned(),
                "s@cret".to_owned()
            ))
        );
        assert_eq!(
            split("rediss://:pw@h:6380"),
            Some(("rediss://h:6380".to_owned(), "pw".to_owned()))
        );
        assert_eq!(
            split("cassandra://h/ks?user=u&password=p%26q&tls=true"),
            Some((
                "cassandra://h/ks?user=u&tls=true".to_owned(),
                "p&q".to_owned()
            ))
        );
        assert_eq!(
            split("cassandra://h/ks?password=p"),
            Some(("cassandra://h/ks".to_owned(), "p".to_owned()))
        );
        assert_eq!(split("mongodb://app@h/db"), None);
        assert_eq!(split("embedded:tern.redb"), None);
        assert_eq!(split("redis://app:@h"), None);
    }

    fn pw(value: &str) -> StorePassword {
        StorePassword::new(value, "TERN_STORE_PASSWORD")
    }

    #[test]
    fn the_password_goes_into_the_userinfo_encoded() {
        let p = pw("p@ss:w/rd%");
        assert_eq!(
            with_password("redis://127.0.0.1:6379/0", &p).unwrap(),
            "redis://:p%40ss%3Aw%2Frd%25@127.0.0.1:6379/0"
        );
        assert_eq!(
            with_password("rediss://app@h:6380?prefix=x", &p).unwrap(),
            "rediss://app:p%40ss%3Aw%2Frd%25@h:6380?prefix=x"
        );
        assert_eq!(
            with_password("mongodb://app@h:1,h2:2/db?tls=true", &p).unwrap(),
            "mongodb://app:p%40ss%3Aw%2Frd%25@h:1,h2:2/db?tls=true"
        );
        assert_eq!(
            with_password("cassandra://app@h:9042/ks", &p).unwrap(),
            "cassandra://app:p%40ss%3Aw%2Frd%25@h:9042/ks"
        );
        assert_eq!(
            with_password("cassandra://h:9042/ks?user=app", &p).unwrap(),
            "cassandra://h:9042/ks?user=app&password=p%40ss%3Aw%2Frd%25"
        );
    }

    #[test]
    fn a_password_that_cannot_go_in_is_refused_without_showing_it() {
        for (url, says) in [
            ("embedded:t.redb", "takes no password"),
            ("memory:", "takes no password"),
            ("redis://:other@h:1", "give it in one place"),
            ("mongodb://h:1/db", "names no user"),
            ("cassandra://h/ks", "names no user"),
        ] {
            let err = with_password(url, &pw("s3cret")).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
            assert!(err.contains("TERN_STORE_PASSWORD"), "{err}");
            assert!(!err.contains("s3cret") && !err.contains("other"), "{err}");
        }
        assert!(format!("{:?}", pw("s3cret")).contains("TERN_STORE_PASSWORD"));
        assert!(!format!("{:?}", pw("s3cret")).contains("s3cret"));
    }

    #[test]
    fn tls_files_become_the_store_options() {
        let tls = TlsFiles {
            ca_file: Some("/etc/t ls/ca.pem".into()),
            cert_file: Some("/c.pem".into()),
            key_file: Some("/k.pem".into()),
        };
        assert_eq!(
            with_tls("rediss://h:6380", &tls).unwrap(),
            "rediss://h:6380?tls_ca_file=%2Fetc%2Ft%20ls%2Fca.pem&tls_cert_file=%2Fc.pem&tls_key_file=%2Fk.pem"
        );
        assert!(
            with_tls("cassandra://h/ks?x=1", &tls)
                .unwrap()
                .starts_with("cassandra://h/ks?x=1&tls_ca_file=")
        );
        let err = with_tls("mongodb://h/db", &tls).unwrap_err().to_string();
        assert!(err.contains("one PEM"), "{err}");
        let mongo = TlsFiles {
            key_file: None,
            ..tls.clone()
        };
        assert_eq!(
            with_tls("mongodb://h/db", &mongo).unwrap(),
            "mongodb://h/db?tls=true&tlsCAFile=%2Fetc%2Ft%20ls%2Fca.pem&tlsCertificateKeyFile=%2Fc.pem"
        );
        let err = with_tls("rediss://h?tls_ca_file=x", &tls)
            .unwrap_err()
            .to_string();
        assert!(err.contains("in one place"), "{err}");
        assert!(with_tls("embedded:x.redb", &tls).is_err());
        assert_eq!(
            with_tls("embedded:x.redb", &TlsFiles::default()).unwrap(),
            "embedded:x.redb"
        );
    }
}
