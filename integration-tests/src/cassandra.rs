//! The cassandra fixture: a fresh keyspace per store on the server named by
//! `TERN_IT_CASSANDRA_URL` (`cassandra://127.0.0.1:9042/ignored`; the keyspace part is
//! replaced). `scripts/servers.sh start cassandra` starts a real Apache Cassandra node there.

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_testkit::battery::Backend;

use crate::common::{env, unique_name};

/// The variable naming the server.
pub const URL_VAR: &str = "TERN_IT_CASSANDRA_URL";
/// The variable naming the three-node cluster (`scripts/servers.sh start cassandra-cluster`).
pub const CLUSTER_URL_VAR: &str = "TERN_IT_CASSANDRA_CLUSTER_URL";
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
    /// The container serving it, when the fixture started one.
    _container: Option<Arc<testcontainers::ContainerAsync<testcontainers::GenericImage>>>,
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

    /// A CQL session on the server (for tables the application would create itself).
    ///
    /// # Errors
    /// Why the session cannot be opened.
    pub async fn session(&self) -> Result<scylla::client::session::Session, String> {
        let authority = self
            .base
            .split_once("://")
            .map_or(self.base.as_str(), |(_, a)| a);
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        scylla::client::session_builder::SessionBuilder::new()
            .known_nodes(host.split(','))
            .auto_await_schema_agreement(false)
            .fetch_schema_metadata(false)
            .build()
            .await
            .map_err(|e| format!("cannot open a CQL session on {}: {e}", self.base))
    }

    /// A fresh keyspace holding `tables` (each `name (columns...)`, created as an application
    /// would), and the URL of a store on it with `options`.
    ///
    /// The keyspace is replicated as the server's URL says, the way the adapter creates its
    /// own keyspaces: `replication_factor=N` or `replication={...}` in the URL's options
    /// (the three-node cluster's URL has `replication_factor=3`), else SimpleStrategy with
    /// replication factor 1 (one node).
    ///
    /// # Errors
    /// A CQL error creating them, or options the adapter refuses.
    pub async fn native_keyspace(
        &self,
        tables: &[&str],
        options: &str,
    ) -> Result<(String, String), String> {
        let session = self.session().await?;
        let ks = unique_name("tern_it");
        let replication = self.replication(&ks)?;
        let mut ddl = vec![format!(
            "CREATE KEYSPACE {ks} WITH replication = {replication}"
        )];
        ddl.extend(tables.iter().map(|t| format!("CREATE TABLE {ks}.{t}")));
        for cql in &ddl {
            session
                .query_unpaged(cql.as_str(), &[])
                .await
                .map_err(|e| format!("{cql}: {e}"))?;
            // A real cluster: wait until every node knows the new table.
            let _ = session.await_schema_agreement().await;
        }
        let sep = if self.query.is_empty() { "?" } else { "&" };
        Ok((
            ks.clone(),
            format!("{}/{ks}{}{sep}{options}", self.base, self.query),
        ))
    }

    /// The replication map (CQL) the URL's options give keyspace `ks`: the adapter's own
    /// reading of `replication_factor=` / `replication=` (default: replication factor 1).
    ///
    /// # Errors
    /// Options the adapter refuses.
    pub fn replication(&self, ks: &str) -> Result<String, String> {
        tern_cassandra::CassConfig::from_url(&format!("{}/{ks}{}", self.base, self.query))
            .map(|config| config.replication)
            .map_err(|e| e.to_string())
    }

    /// [`Self::native_keyspace`] and a store opened on it: the keyspace, the store's URL and
    /// the store.
    ///
    /// # Errors
    /// A CQL error creating the tables, or the adapter's error opening the store.
    pub async fn native_store(
        &self,
        tables: &[&str],
        options: &str,
    ) -> Result<(String, String, Arc<dyn Store>), String> {
        let (ks, url) = self.native_keyspace(tables, options).await?;
        let store = tern_cassandra::open(&url)
            .await
            .map_err(|e| format!("cannot open a store on {ks}: {e:#}"))?;
        Ok((ks, url, store))
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

#[async_trait]
impl tern_testkit::battery::CopyRenameBackend for CassBackend {
    async fn fresh_with_after_copy_hook(
        &self,
        hook: tern_core::store::rename_copy::AfterCopyHook,
    ) -> (Arc<dyn Store>, Arc<dyn Store>) {
        let url = self.fresh_url();
        let store = tern_cassandra::open(&url)
            .await
            .unwrap_or_else(|e| panic!("{URL_VAR} is set but the store cannot be opened: {e:#}"));
        let config = tern_cassandra::CassConfig::from_url(&url)
            .unwrap_or_else(|e| panic!("a cassandra store URL: {e}"));
        let hooked = tern_cassandra::CassStore::connect(config)
            .await
            .unwrap_or_else(|e| panic!("opening a cassandra store: {e:#}"))
            .with_after_copy_hook(move |keys| hook(keys));
        (store, Arc::new(hooked))
    }
}

/// The cassandra backend, or why it is not available here.
///
/// # Errors
/// The reason the backend is skipped.
pub async fn backend() -> Result<CassBackend, String> {
    let Some(url) = env(URL_VAR) else {
        return container_backend().await.map_err(|reason| {
            format!(
                "{URL_VAR} is not set (scripts/servers.sh start cassandra; eval \"$(scripts/servers.sh env)\"), \
                 and no container: {reason}"
            )
        });
    };
    from_url(&url, URL_VAR)
}

/// The three-node cluster of `TERN_IT_CASSANDRA_CLUSTER_URL` (its options, e.g.
/// `replication_factor=3&consistency=quorum`, kept for every fresh keyspace), or why not.
///
/// # Errors
/// The reason the cluster tests are skipped.
pub fn cluster_backend() -> Result<CassBackend, String> {
    let Some(url) = env(CLUSTER_URL_VAR) else {
        return Err(format!(
            "{CLUSTER_URL_VAR} is not set (scripts/servers.sh start cassandra-cluster; \
             eval \"$(scripts/servers.sh env)\")"
        ));
    };
    from_url(&url, CLUSTER_URL_VAR)
}

fn from_url(url: &str, var: &str) -> Result<CassBackend, String> {
    let (rest, query) = match url.split_once('?') {
        Some((rest, query)) => (rest.to_owned(), format!("?{query}")),
        None => (url.to_owned(), String::new()),
    };
    let base = match rest.split_once("://") {
        Some((scheme, after)) => {
            let authority = after.split('/').next().unwrap_or(after);
            format!("{scheme}://{authority}")
        }
        None => return Err(format!("{var} is not a cassandra:// URL")),
    };
    Ok(CassBackend {
        base,
        query,
        _container: None,
    })
}

/// The default image of the container path (used only if it is present locally).
pub const DEFAULT_IMAGE: &str = "cassandra:5";

/// A real Cassandra (or ScyllaDB, by `TERN_IT_CASSANDRA_IMAGE`) in a container
/// with host networking, its CQL port moved to a free port of 127.0.0.1.
async fn container_backend() -> Result<CassBackend, String> {
    let image = env(IMAGE_VAR).unwrap_or_else(|| DEFAULT_IMAGE.to_owned());
    let port = crate::common::free_port()?;
    let cmd: Vec<String> = vec![
        "cassandra".to_owned(),
        "-f".to_owned(),
        format!("-Dcassandra.native_transport_port={port}"),
        "-Dcassandra.skip_wait_for_gossip_to_settle=0".to_owned(),
    ];
    let container = crate::common::start_host_network_container(
        &image,
        &cmd,
        "Starting listening for CQL clients",
    )
    .await?;
    Ok(CassBackend {
        base: format!("cassandra://127.0.0.1:{port}"),
        query: String::new(),
        _container: Some(Arc::new(container)),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::CassBackend;

    fn backend(query: &str) -> CassBackend {
        CassBackend {
            base: "cassandra://127.0.0.1:9142".to_owned(),
            query: query.to_owned(),
            _container: None,
        }
    }

    #[test]
    fn native_keyspaces_are_replicated_as_the_url_says() {
        let rf = |query: &str| backend(query).replication("ks").unwrap();
        assert!(rf("").contains("'replication_factor': 1"), "{}", rf(""));
        assert!(
            rf("?replication_factor=3&consistency=quorum").contains("'replication_factor': 3"),
            "{}",
            rf("?replication_factor=3")
        );
        let nts = "?replication=%7B'class':'NetworkTopologyStrategy','dc1':3%7D";
        assert_eq!(rf(nts), "{'class':'NetworkTopologyStrategy','dc1':3}");
        let err = backend("?replication_factor=0")
            .replication("ks")
            .unwrap_err();
        assert!(err.contains("replication_factor"), "{err}");
    }
}
