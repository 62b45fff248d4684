//! The Redis fixture.
//!
//! - [`backend`]: the server at `TERN_IT_REDIS_URL` (`scripts/servers.sh`);
//! - [`cluster_backend`]: the Redis Cluster at `TERN_IT_REDIS_CLUSTER_URL`;
//! - [`container_backend`]: a container of `TERN_IT_REDIS_IMAGE` (default
//!   `redis:7`; `scripts/redis-image.sh` builds `local/tern-redis:7`), host
//!   networking on a free port of 127.0.0.1.
//!
//! Every fresh store lives under a key namespace of its own (`?prefix=`).

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_testkit::battery::Backend;

use crate::common;

/// The default image of the container path.
pub const DEFAULT_IMAGE: &str = "redis:7";

/// Hands out Redis stores, each in a namespace of its own.
#[derive(Debug, Clone)]
pub struct RedisBackend {
    url: String,
    query: String,
    /// Keeps the container (if any) running as long as a clone of the backend lives.
    _container: Option<Arc<testcontainers::ContainerAsync<testcontainers::GenericImage>>>,
}

impl RedisBackend {
    /// The URL of the server (no namespace).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The same server, with extra URL options (`json=*` ...) for every fresh store.
    #[must_use]
    pub fn with_options(mut self, query: &str) -> RedisBackend {
        self.query = query.to_owned();
        self
    }

    /// A store URL with a new unique namespace.
    pub fn fresh_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        let mut url = format!("{}{sep}prefix={}", self.url, common::unique_name("tern_it"));
        if !self.query.is_empty() {
            url.push('&');
            url.push_str(&self.query);
        }
        url
    }

    /// Opens a fresh store, with an error instead of a panic.
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn try_fresh(&self) -> Result<Arc<dyn Store>, tern_core::store::Error> {
        open(&self.fresh_url()).await
    }
}

/// The key prefix (`prefix=`) of a store URL made by [`RedisBackend::fresh_url`].
///
/// # Panics
/// When the URL has no prefix.
pub fn prefix_of(url: &str) -> String {
    match url
        .split("prefix=")
        .nth(1)
        .and_then(|rest| rest.split('&').next())
    {
        Some(p) => p.to_owned(),
        None => panic!("{url} has no prefix="),
    }
}

/// Opens the Redis store named by `url` (`RedisConfig::from_url`, then `RedisStore::connect`).
///
/// # Errors
/// A bad URL, or a server that does not answer.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, tern_core::store::Error> {
    let config = tern_redis::RedisConfig::from_url(url)?;
    Ok(Arc::new(tern_redis::RedisStore::connect(config).await?))
}

#[async_trait]
impl Backend for RedisBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        match self.try_fresh().await {
            Ok(store) => store,
            Err(e) => panic!("cannot open a fresh Redis store: {e}"),
        }
    }
}

#[async_trait]
impl tern_testkit::battery::CopyRenameBackend for RedisBackend {
    async fn fresh_with_after_copy_hook(
        &self,
        hook: tern_core::store::rename_copy::AfterCopyHook,
    ) -> (Arc<dyn Store>, Arc<dyn Store>) {
        let url = self.fresh_url();
        let store = open(&url)
            .await
            .unwrap_or_else(|e| panic!("cannot open a fresh Redis store: {e}"));
        let config = tern_redis::RedisConfig::from_url(&url)
            .unwrap_or_else(|e| panic!("a Redis store URL: {e}"));
        let hooked = tern_redis::RedisStore::connect(config)
            .await
            .unwrap_or_else(|e| panic!("cannot open a Redis store: {e}"))
            .with_after_copy_hook(move |keys| hook(keys));
        (store, Arc::new(hooked))
    }
}

/// The server at `url`, taken from the variable `var`.
///
/// # Panics
/// The server does not answer: fail (not skip), since the caller asked for
/// this server.
async fn answering(var: &str, url: String) -> RedisBackend {
    let backend = RedisBackend {
        url,
        query: String::new(),
        _container: None,
    };
    if let Err(e) = backend.try_fresh().await {
        panic!("{var} is set but unusable: {e}");
    }
    backend
}

/// The Redis server at `TERN_IT_REDIS_URL`, or why it is not available here.
///
/// # Errors
/// The skip reason.
pub async fn backend() -> Result<RedisBackend, String> {
    let url = common::env("TERN_IT_REDIS_URL").ok_or_else(|| {
        "TERN_IT_REDIS_URL is not set (run `eval \"$(scripts/servers.sh env)\"`)".to_owned()
    })?;
    Ok(answering("TERN_IT_REDIS_URL", url).await)
}

/// The Redis Cluster at `TERN_IT_REDIS_CLUSTER_URL` (`redis://127.0.0.1:7001/?cluster=1`,
/// `scripts/servers.sh start cluster`), or why it is not available here.
///
/// # Errors
/// The skip reason.
pub async fn cluster_backend() -> Result<RedisBackend, String> {
    let url = common::env("TERN_IT_REDIS_CLUSTER_URL").ok_or_else(|| {
        "TERN_IT_REDIS_CLUSTER_URL is not set (run `scripts/servers.sh start cluster` and \
         `eval \"$(scripts/servers.sh env cluster)\"`)"
            .to_owned()
    })?;
    Ok(answering("TERN_IT_REDIS_CLUSTER_URL", url).await)
}

/// [`cluster_backend`] with extra URL options (`id_tag=1` ...) for every fresh store.
///
/// # Errors
/// The skip reason.
pub async fn cluster_backend_with(options: &str) -> Result<RedisBackend, String> {
    cluster_backend().await.map(|b| b.with_options(options))
}

/// [`backend`] with extra URL options (`json=*` ...) for every fresh store.
///
/// # Errors
/// The skip reason.
pub async fn backend_with(options: &str) -> Result<RedisBackend, String> {
    backend().await.map(|b| b.with_options(options))
}

/// A Redis container of `TERN_IT_REDIS_IMAGE` (default [`DEFAULT_IMAGE`]) on a
/// free port of 127.0.0.1, or why none can run here.
///
/// # Errors
/// The skip reason (no docker, image not built and not pullable, start failed).
pub async fn container_backend() -> Result<RedisBackend, String> {
    let image = common::env("TERN_IT_REDIS_IMAGE").unwrap_or_else(|| DEFAULT_IMAGE.to_owned());
    let port = common::free_port()?;
    let container = common::start_host_network_container(
        &image,
        &[
            "redis-server".to_owned(),
            "--bind".to_owned(),
            "127.0.0.1".to_owned(),
            "--port".to_owned(),
            port.to_string(),
            "--save".to_owned(),
            String::new(),
            "--appendonly".to_owned(),
            "no".to_owned(),
        ],
        "Ready to accept connections",
    )
    .await?;
    let backend = RedisBackend {
        url: format!("redis://127.0.0.1:{port}"),
        query: String::new(),
        _container: Some(Arc::new(container)),
    };
    backend
        .try_fresh()
        .await
        .map_err(|e| format!("the container of {image} does not answer: {e}"))?;
    Ok(backend)
}

/// A module per Redis store a battery runs on, each one running `$battery!`
/// (a battery macro of the test kit: `tern_testkit::battery_tests`,
/// `tern_testkit::lazy_battery_tests`) with the store's label and backend, so
/// that every battery runs on the same five: `server` (`redis`, the server at
/// `TERN_IT_REDIS_URL`), `json_strings` (`redis-json`, every kind a JSON
/// string), `cluster` (`redis-cluster`), `cluster_id_tag`
/// (`redis-cluster-id-tag`) and `container` (`redis-container`).
#[macro_export]
macro_rules! redis_batteries {
    ($($battery:ident)::+) => {
        mod server {
            $($battery)::+!("redis", $crate::redis::backend());
        }

        /// Every kind a JSON string (`json=*`): puts are plain `SET ... KEEPTTL`.
        mod json_strings {
            $($battery)::+!("redis-json", $crate::redis::backend_with("json=*"));
        }

        /// The 3-master cluster at `TERN_IT_REDIS_CLUSTER_URL`.
        mod cluster {
            $($battery)::+!("redis-cluster", $crate::redis::cluster_backend());
        }

        /// The cluster with each id written as a hash tag (`ns:kind:{id}`): the
        /// keys of one id under every kind name share a slot.
        mod cluster_id_tag {
            $($battery)::+!(
                "redis-cluster-id-tag",
                $crate::redis::cluster_backend_with("id_tag=1")
            );
        }

        /// A container of its own per test.
        mod container {
            $($battery)::+!("redis-container", $crate::redis::container_backend());
        }
    };
}
