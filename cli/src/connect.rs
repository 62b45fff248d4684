//! Opening a store from its URL.

use std::sync::Arc;

use anyhow::{Context, bail};
use tern_core::store::{Store, url};

/// Opens the store named by `store_url`. Messages name the URL without its password.
///
/// # Errors
/// An unknown scheme, or a store that cannot be opened or reached.
pub async fn open(store_url: &str) -> anyhow::Result<Arc<dyn Store>> {
    let shown = url::redact(store_url);
    let Some(scheme) = url::scheme(store_url) else {
        bail!(
            "store URL {shown:?} has no scheme; use embedded:PATH, mongodb://HOST:PORT/DB, redis://HOST:PORT or cassandra://HOST:PORT/KEYSPACE"
        );
    };
    match scheme.as_str() {
        "embedded" => {
            let path = store_url
                .trim_start_matches("embedded:")
                .trim_start_matches("//");
            if path.is_empty() {
                bail!(
                    "store URL {shown:?} names no file; write embedded:PATH, e.g. embedded:tern.redb"
                );
            }
            let store = tern_core::store::embedded::EmbeddedStore::open(path)
                .context("cannot open the embedded store")?;
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
