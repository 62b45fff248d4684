//! tern adapter for Cassandra and ScyllaDB: [`CassStore`], made by [`CassStore::connect`]
//! from a [`CassConfig`] (or by [`open`] from a `cassandra://host:port/keyspace` URL).
//!
//! The one design choice to know: a kind is a table of one of two layouts. By default tern
//! creates a table of its **document layout** `(id text PRIMARY KEY, tern_version bigint, doc
//! blob)`, where `doc` holds the whole entity in tern's canonical binary encoding, so arbitrary
//! property sets need no DDL, values round-trip exactly, and compare-and-set is one lightweight
//! transaction comparing `tern_version` and `doc`. Tables named by `native=` keep the
//! application's own **native layout** (fixed schema, one column per property), and the
//! evolution language changes their schema (`ALTER TABLE ... ADD`/`DROP`).
//!
//! See the sections below for both mappings, the DDL of the language, the capability
//! checklist, paging-state validity and the token-range fallback, LWT and serial consistency,
//! and what the real server showed that the earlier test server did not.
#![doc = include_str!("docs.md")]
#![deny(missing_docs)]

mod backend;
mod config;
mod core;
mod cql_type;
mod cursor;
mod ddl;
mod document;
mod native;
mod partitions;
mod rename;
mod resolve;
mod scan;
mod schema;
mod serial;
mod statement;
mod tls;
mod token_range;

use std::sync::Arc;

use tern_core::store::{Error, Store};

pub use crate::core::CassStore;
pub use config::{
    CASSANDRA_SCHEME, CassConfig, CassTls, ConsistencyLevel, NativeTables, SchemaAgreement,
    SerialLevel,
};

/// Opens the store named by `url` (`cassandra://host:port/keyspace?options`, see [`CassConfig`]).
///
/// # Errors
/// An invalid URL ([`tern_core::store::ErrorKind::ConfigInvalid`]), an unreachable cluster
/// ([`tern_core::store::ErrorKind::Unavailable`], temporary), a refused schema change. Messages
/// name the URL without its password.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    let config = CassConfig::from_url(url)?;
    Ok(Arc::new(CassStore::connect(config).await?))
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
