//! The mongodb fixture: a server from `TERN_IT_MONGODB_URL`, each fresh store in
//! a database of its own.

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_core::testing::battery::Backend;

use crate::common;

/// Hands out MongoDB stores, each in its own database of one server.
#[derive(Debug, Clone)]
pub struct MongoBackend {
    /// The server URL without a database (`mongodb://127.0.0.1:27017`).
    base: String,
}

impl MongoBackend {
    /// The URL of a store in database `db` of this server.
    pub fn url_for(&self, db: &str) -> String {
        with_database(&self.base, db)
    }

    /// A fresh store in a database of its own; also returns the database name.
    ///
    /// # Panics
    /// When the store cannot be opened (tests only).
    pub async fn fresh_named(&self) -> (Arc<dyn Store>, String) {
        let db = common::unique_name("tern_it");
        let store = tern_mongodb::open(&self.url_for(&db))
            .await
            .unwrap_or_else(|e| panic!("opening a mongodb store: {e}"));
        (store, db)
    }
}

/// `url` with its path replaced by `/db` (options kept).
pub fn with_database(url: &str, db: &str) -> String {
    let (main, query) = match url.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (url, None),
    };
    let (scheme, rest) = main.split_once("://").unwrap_or(("mongodb", main));
    let host = rest.split('/').next().unwrap_or(rest);
    match query {
        Some(q) => format!("{scheme}://{host}/{db}?{q}"),
        None => format!("{scheme}://{host}/{db}"),
    }
}

#[async_trait]
impl Backend for MongoBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        self.fresh_named().await.0
    }
}

/// The mongodb backend, or why it is not available here.
///
/// # Errors
/// The reason the backend is skipped (no `TERN_IT_MONGODB_URL`).
pub async fn backend() -> Result<MongoBackend, String> {
    match common::env("TERN_IT_MONGODB_URL") {
        Some(base) => Ok(MongoBackend { base }),
        None => Err(
            "TERN_IT_MONGODB_URL is not set (start a server: scripts/servers.sh start mongodb; eval \"$(scripts/servers.sh env)\")"
                .to_owned(),
        ),
    }
}
