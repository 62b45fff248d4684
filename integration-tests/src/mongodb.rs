//! The mongodb fixture: a server from `TERN_IT_MONGODB_URL`, each fresh store in
//! a database of its own.

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_testkit::battery::Backend;

use crate::common;

/// Hands out MongoDB stores, each in its own database of one server.
#[derive(Debug, Clone)]
pub struct MongoBackend {
    /// The server URL without a database (`mongodb://127.0.0.1:27017`).
    base: String,
    /// The container serving it, when the fixture started one.
    _container: Option<Arc<testcontainers::ContainerAsync<testcontainers::GenericImage>>>,
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

#[async_trait]
impl tern_testkit::battery::CopyRenameBackend for MongoBackend {
    async fn fresh_with_after_copy_hook(
        &self,
        hook: tern_core::store::rename_copy::AfterCopyHook,
    ) -> (Arc<dyn Store>, Arc<dyn Store>) {
        let (store, db) = self.fresh_named().await;
        let config = tern_mongodb::MongoConfig::from_url(&self.url_for(&db))
            .unwrap_or_else(|e| panic!("a mongodb store URL: {e}"));
        let hooked = tern_mongodb::MongoStore::connect(config)
            .await
            .unwrap_or_else(|e| panic!("opening a mongodb store: {e}"))
            .with_after_copy_hook(move |keys| hook(keys));
        (store, Arc::new(hooked))
    }
}

/// The default image of the container path (used only if it is present locally).
pub const DEFAULT_IMAGE: &str = "mongo:8";

/// The mongodb backend: the server at `TERN_IT_MONGODB_URL`; else a container
/// of `TERN_IT_MONGODB_IMAGE` (default `mongo:8`) with host networking on a free
/// port of 127.0.0.1; else the reason it is not available here.
///
/// # Errors
/// The reason the backend is skipped.
pub async fn backend() -> Result<MongoBackend, String> {
    if let Some(base) = common::env("TERN_IT_MONGODB_URL") {
        return Ok(MongoBackend {
            base,
            _container: None,
        });
    }
    let image = common::env("TERN_IT_MONGODB_IMAGE").unwrap_or_else(|| DEFAULT_IMAGE.to_owned());
    let port = common::free_port()?;
    let cmd: Vec<String> = [
        "mongod",
        "--bind_ip",
        "127.0.0.1",
        "--port",
        &port.to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let container = common::start_host_network_container(&image, &cmd, "Waiting for connections")
        .await
        .map_err(|reason| {
            format!(
                "TERN_IT_MONGODB_URL is not set (scripts/servers.sh start mongodb; eval \"$(scripts/servers.sh env)\"), \
                 and no container: {reason}"
            )
        })?;
    Ok(MongoBackend {
        base: format!("mongodb://127.0.0.1:{port}/?directConnection=true"),
        _container: Some(Arc::new(container)),
    })
}
