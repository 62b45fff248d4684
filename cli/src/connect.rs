//! Opening a store from its URL.

use std::sync::Arc;

use anyhow::{Context, bail};
use tern_core::store::embedded::EmbeddedOptions;
use tern_core::store::{Store, url};

use crate::credentials::{self, StorePassword, TlsFiles};

/// Opens the store named by `store_url`, creating a missing embedded store
/// file. Messages name the URL without its password.
///
/// # Errors
/// An unknown scheme, or a store that cannot be opened or reached.
pub async fn open(store_url: &str) -> anyhow::Result<Arc<dyn Store>> {
    open_with(store_url, true).await
}

/// Opens the store named by `store_url` with the password and the TLS files
/// given apart from it (see [`crate::credentials`]); the URL holding them
/// lives in memory only. Messages name the URL without its password.
///
/// # Errors
/// As [`open_checking`], and a password or TLS files the store cannot take.
pub async fn open_secure(
    store_url: &str,
    password: Option<&StorePassword>,
    tls: &TlsFiles,
    create: bool,
    check: bool,
) -> anyhow::Result<Arc<dyn Store>> {
    let full = full_url(store_url, password, tls)?;
    open_checking(&full, create, check).await
}

/// `store_url` with the password and the TLS files given apart from it: the URL
/// the drivers take, which lives in memory only.
///
/// # Errors
/// A password or TLS files the store cannot take.
pub fn full_url(
    store_url: &str,
    password: Option<&StorePassword>,
    tls: &TlsFiles,
) -> anyhow::Result<String> {
    let mut full = credentials::with_tls(store_url, tls)?;
    if let Some(password) = password {
        full = credentials::with_password(&full, password)?;
    }
    Ok(full)
}

/// Where `store_url` (a full URL, [`full_url`]) names a Redis Cluster whose
/// masters run tern's server module: sends every master tern's state document
/// (`tern_redis::module::push_spec`). A master that does not hold the state
/// key knows the lazy migrations only from what it was sent, so this runs
/// after every command that may change the state (docs/module.md, "Valkey /
/// Redis Cluster"). Elsewhere nothing. Returns the number of masters sent it.
///
/// # Errors
/// A master that cannot be reached or refuses the spec.
pub async fn push_module_spec(full_url: &str) -> anyhow::Result<usize> {
    if !matches!(url::scheme(full_url).as_deref(), Some("redis" | "rediss")) {
        return Ok(0);
    }
    let config = tern_redis::RedisConfig::from_url(full_url)?;
    if !config.cluster {
        // One server reads the state key itself.
        return Ok(0);
    }
    let store = Box::pin(tern_redis::RedisStore::connect(config)).await?;
    if store.features().lazy_in_server.is_none() {
        return Ok(0);
    }
    Ok(tern_redis::module::push_spec(full_url).await?)
}

/// The file of an `embedded:` URL (scheme in any case; `embedded:PATH`,
/// `embedded://PATH` or `embedded:///ABSOLUTE`, each optionally followed by
/// `?cache_mb=N`, redb's page cache in MiB), or `None` for another scheme.
///
/// # Errors
/// A URL naming no file, or one with a user or password (they would become
/// part of the file name).
pub fn embedded_path(store_url: &str) -> anyhow::Result<Option<&str>> {
    if url::scheme(store_url).as_deref() != Some("embedded") {
        return Ok(None);
    }
    let rest = &store_url["embedded:".len()..];
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let authority = after.split('/').next().unwrap_or_default();
            if authority.contains('@') {
                bail!(
                    "store URL {:?}: the embedded store takes no user or password; write embedded:PATH",
                    url::redact(store_url)
                );
            }
            after
        }
        None => rest,
    };
    // `?cache_mb=N` is an option of the store, not part of the file name.
    let (path, _) = EmbeddedOptions::split_url(path)
        .with_context(|| format!("store URL {:?}", url::redact(store_url)))?;
    if path.is_empty() {
        bail!(
            "store URL {:?} names no file; write embedded:PATH, e.g. embedded:tern.redb",
            url::redact(store_url)
        );
    }
    Ok(Some(path))
}

/// Opens the store named by `store_url`. An embedded store file that does not
/// exist is created only when `create` is true; otherwise the error names the
/// path, the `.redb` files beside it, and the ways to create it (a mistyped
/// path must not become a new, empty store that `tern up` "migrates").
///
/// # Errors
/// As [`open`], and a missing embedded file without `create`.
pub async fn open_with(store_url: &str, create: bool) -> anyhow::Result<Arc<dyn Store>> {
    open_checking(store_url, create, false).await
}

/// As [`open_with`]; with `check`, an embedded store's file is checked
/// against redb's page checksums first (`tern verify`, `export`, `import`:
/// a corrupted file is reported, never exported or verified silently wrong).
///
/// # Errors
/// As [`open_with`], and a corrupted embedded file.
pub async fn open_checking(
    store_url: &str,
    create: bool,
    check: bool,
) -> anyhow::Result<Arc<dyn Store>> {
    let shown = url::redact(store_url);
    let Some(scheme) = url::scheme(store_url) else {
        bail!(
            "store URL {shown:?} has no scheme; use embedded:PATH, mongodb://HOST:PORT/DB, redis://HOST:PORT or cassandra://HOST:PORT/KEYSPACE"
        );
    };
    match scheme.as_str() {
        "embedded" => {
            let path = embedded_path(store_url)?.unwrap_or_default();
            if !create && !std::path::Path::new(path).exists() {
                bail!("{}", missing_store_message(path));
            }
            let rest = &store_url["embedded:".len()..];
            let (_, options) =
                EmbeddedOptions::split_url(rest).context("cannot open the embedded store")?;
            let store = if check {
                tern_core::store::embedded::EmbeddedStore::open_checked(path, options)
            } else {
                tern_core::store::embedded::EmbeddedStore::open_with(path, options)
            }
            .context("cannot open the embedded store")?;
            if store.was_repaired() {
                crate::errln!(
                    "note: the embedded store {path} was not closed cleanly (a crash or a kill): redb repaired it and \
                     tern checked every page against its checksum; its committed writes are intact, and a write \
                     under way at the crash was rolled back (`tern status` shows where a run stopped; run it again)"
                );
            }
            Ok(Arc::new(store))
        }
        "memory" => Ok(Arc::new(tern_core::store::memory::MemoryStore::new())),
        // Boxed: the driver's future is deep enough to overflow the layout query depth of main.
        "cassandra" | "scylla" => Box::pin(tern_cassandra::open(store_url))
            .await
            .context("cannot open the cassandra store"),
        "mongodb" | "mongodb+srv" => Box::pin(tern_mongodb::open(store_url))
            .await
            .context("cannot open the mongodb store"),
        "redis" | "rediss" => {
            let config = tern_redis::RedisConfig::from_url(store_url)
                .context("cannot open the redis store")?;
            let store = Box::pin(tern_redis::RedisStore::connect(config))
                .await
                .context("cannot open the redis store")?;
            Ok(Arc::new(store))
        }
        other => bail!(
            "unknown store scheme {other:?} in {shown}; use embedded:, mongodb://, redis:// or cassandra://"
        ),
    }
}

/// Says that the embedded store at `path` does not exist, with the `.redb`
/// files beside it (a typo's likely target) and how to create one.
fn missing_store_message(path: &str) -> String {
    let file = std::path::Path::new(path);
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut nearby: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.extension()
                        .is_some_and(|x| x.eq_ignore_ascii_case("redb"))
                })
                .map(|p| format!("embedded:{}", p.display()))
                .collect()
        })
        .unwrap_or_default();
    nearby.sort();
    nearby.truncate(5);
    let hint = if nearby.is_empty() {
        String::new()
    } else {
        format!(" (stores there: {})", nearby.join(", "))
    };
    format!(
        "no embedded store at {path}{hint}; check the store URL, or create it: `tern import FILE` creates it, \
         and --create-store lets any command start with a new, empty store"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::embedded_path;

    #[test]
    fn the_cache_option_is_not_part_of_the_file() {
        assert_eq!(
            embedded_path("embedded:a/t.redb?cache_mb=8").unwrap(),
            Some("a/t.redb")
        );
        assert_eq!(
            embedded_path("embedded:///abs/t.redb?cache_mb=8").unwrap(),
            Some("/abs/t.redb")
        );
        assert_eq!(embedded_path("embedded:t.redb").unwrap(), Some("t.redb"));
        let err = embedded_path("embedded:t.redb?cache=8").unwrap_err();
        assert!(format!("{err:#}").contains("cache_mb"), "{err:#}");
    }
}
