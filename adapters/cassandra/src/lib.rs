//! tern adapter for Cassandra and ScyllaDB: [`CassStore`], opened by [`open`] from a
//! `cassandra://host:port/keyspace` URL.
//!
//! The one design choice to know: every kind is a table of tern's **document layout**
//! `(id text PRIMARY KEY, _v bigint, doc blob)`, where `doc` holds the whole entity in tern's
//! canonical binary encoding, so arbitrary property sets need no DDL, values round-trip
//! exactly, and compare-and-set is one lightweight transaction comparing `_v` and `doc`.
//!
//! See the sections below for the mapping, the capability checklist, paging-state validity,
//! LWT and serial consistency, and what the test server supports.
#![doc = include_str!("docs.md")]
#![deny(missing_docs)]

mod backend;
mod config;
mod core;

use std::sync::Arc;

use tern_core::store::{Error, Store};

pub use backend::CassStore;
pub use config::{CASSANDRA_SCHEME, CassConfig, ConsistencyLevel, SchemaAgreement, SerialLevel};

/// Opens the store named by `url` (`cassandra://host:port/keyspace?options`, see [`CassConfig`]).
///
/// # Errors
/// An invalid URL ([`tern_core::store::ErrorKind::ConfigInvalid`]), an unreachable cluster
/// ([`tern_core::store::ErrorKind::Unavailable`], temporary), a refused schema change. Messages
/// name the URL without its password.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    let config = CassConfig::from_url(url)?;
    Ok(Arc::new(CassStore::open(config).await?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::CassStore>();
        check::<super::CassConfig>();
    }
}
