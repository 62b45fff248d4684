//! tern adapter for Redis: [`RedisStore`] keeps each entity under the key
//! `[ns:]kind:id`, as a hash (default) or as a JSON string, per kind.
//!
//! The one choice to know: Redis has no ordered scan, so scans use `SCAN`,
//! which may return a key twice and may miss keys written meanwhile; tern's
//! version scoping and census make both harmless.
//!
#![doc = include_str!("docs.md")]
#![deny(missing_docs)]

mod backend;
mod codec;
mod config;
mod core;
mod pushdown;
mod scanpos;

use std::sync::Arc;

use tern_core::store::{Error, Store};

pub use backend::{MAX_KEYS_PER_SCRIPT, RedisStore};
pub use config::{KindLayout, REDIS_SCHEME, RedisConfig};

/// Opens the store named by `url`
/// (`redis://[user:pass@]host:port[/db][?prefix=ns&sep=:&json=k1,k2&version_field=_v]`).
///
/// # Errors
/// [`ErrorKind::ConfigInvalid`](tern_core::store::ErrorKind::ConfigInvalid) for a bad URL,
/// [`ErrorKind::Unavailable`](tern_core::store::ErrorKind::Unavailable) when the server
/// does not answer; the message names the URL without its password.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    let config = RedisConfig::parse(url)?;
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
