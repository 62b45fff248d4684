//! tern adapter for Redis: [`RedisStore`] keeps each entity under the key
//! `[ns:]kind:id`, as a hash (default), a JSON string, a plain string, a set,
//! a list or a sorted set, per kind; kinds may be prefix hierarchies
//! (`amico:followers`), and the server may be a Redis Cluster.
//!
//! The one choice to know: Redis has no ordered scan, so scans use `SCAN`,
//! which may return a key twice and may miss keys written meanwhile; tern's
//! version scoping and census make both harmless.
//!
#![doc = include_str!("docs.md")]
#![deny(missing_docs)]

mod atomic;
mod backend;
mod codec;
mod config;
mod conn;
mod containers;
mod core;
mod exact;
mod json_value;
mod lazy_ops;
pub mod module;
mod moving;
mod partitions;
mod per_master;
mod pushdown;
mod rename;
mod scanpos;
mod tls;
mod topology;
mod typed_json;
pub mod wire;

use std::sync::Arc;

use tern_core::store::{Error, Store};

pub use crate::core::{MAX_KEYS_PER_SCRIPT, RedisStore};
pub use config::{KindLayout, REDIS_SCHEME, RedisConfig, TlsFiles};
pub use lazy_ops::RedisLazy;
pub use tls::install_crypto_provider;

/// Opens the store named by `url` (see [`RedisConfig::from_url`]) and checks that the
/// server answers ([`RedisStore::connect`]).
///
/// # Errors
/// As [`RedisConfig::from_url`] and [`RedisStore::connect`]: a URL that does not parse
/// ([`tern_core::store::ErrorKind::ConfigInvalid`]), a server that does not answer
/// ([`tern_core::store::ErrorKind::Unavailable`], temporary). Messages name the URL
/// without its password.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    let config = RedisConfig::from_url(url)?;
    Ok(Arc::new(RedisStore::connect(config).await?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn store_is_send_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::RedisStore>();
        assert_send_sync::<super::RedisConfig>();
    }
}
