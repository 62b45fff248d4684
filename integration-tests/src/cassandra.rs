//! The cassandra fixture: a fresh keyspace per store on the server named by
//! `TERN_IT_CASSANDRA_URL` (`cassandra://127.0.0.1:9042/ignored`; the keyspace part is
//! replaced). `scripts/servers.sh start cassandra` starts tern-cql-server there.

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_core::testing::battery::Backend;

use crate::common::{env, unique_name};

/// The variable naming the server.
pub const URL_VAR: &str = "TERN_IT_CASSANDRA_URL";
/// The variable naming a container image (not started by this harness: no image can be pulled
/// on the build machines; start the server yourself and set [`URL_VAR`]).
pub const IMAGE_VAR: &str = "TERN_IT_CASSANDRA_IMAGE";

/// Hands out stores, each in a keyspace of its own.
#[derive(Debug, Clone)]
pub struct CassBackend {
    /// `cassandra://host:port` (no keyspace).
    base: String,
    /// `?options` kept from the URL (may be empty).
    query: String,
}

impl CassBackend {
    /// The URL of a fresh keyspace.
    pub fn fresh_url(&self) -> String {
        format!("{}/{}{}", self.base, unique_name("tern_it"), self.query)
    }

    /// The server's URL without a keyspace, for messages.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// A fresh store, or the error opening it.
    ///
    /// # Errors
    /// The adapter's error.
    pub async fn try_fresh(&self) -> Result<Arc<dyn Store>, tern_core::store::Error> {
        tern_cassandra::open(&self.fresh_url()).await
    }
}

#[async_trait]
impl Backend for CassBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        match self.try_fresh().await {
            Ok(store) => store,
            Err(e) => panic!("{URL_VAR} is set but the store cannot be opened: {e:#}"),
        }
    }
}

/// The cassandra backend, or why it is not available here.
///
/// # Errors
/// The reason the backend is skipped.
pub async fn backend() -> Result<CassBackend, String> {
    let Some(url) = env(URL_VAR) else {
        return Err(match env(IMAGE_VAR) {
            Some(image) => format!(
                "{IMAGE_VAR}={image} is set but this harness does not start Cassandra containers; \
                 start the server (host networking, 127.0.0.1) and set {URL_VAR}"
            ),
            None => format!(
                "{URL_VAR} is not set (scripts/servers.sh start cassandra; eval \"$(scripts/servers.sh env)\")"
            ),
        });
    };
    let (rest, query) = match url.split_once('?') {
        Some((rest, query)) => (rest.to_owned(), format!("?{query}")),
        None => (url.clone(), String::new()),
    };
    let base = match rest.split_once("://") {
        Some((scheme, after)) => {
            let authority = after.split('/').next().unwrap_or(after);
            format!("{scheme}://{authority}")
        }
        None => return Err(format!("{URL_VAR} is not a cassandra:// URL")),
    };
    Ok(CassBackend { base, query })
}
