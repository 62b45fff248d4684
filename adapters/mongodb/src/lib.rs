//! tern adapter for MongoDB (and MongoDB wire-protocol servers such as SecantusDB).
//!
//! The central type is [`MongoStore`], made by [`MongoStore::connect`] from a
//! [`MongoConfig`] (or by [`open`] from a URL): a kind is a collection of
//! the database named by the URL path, an entity is a document whose `_id` is the id and
//! whose `_v` field is the version. The one design choice to know: property names are
//! escaped reversibly (`%`-encoding) so that every tern name, `$`-prefixed, dotted or empty,
//! is a legal field name; see the table below.
#![doc = include_str!("docs.md")]
#![deny(missing_docs)]

mod atomic;
mod backend;
mod batches;
mod codec;
mod config;
mod core;
mod partitions;
mod pushdown;
mod rename;
mod writes;

use std::sync::Arc;

use tern_core::store::{Error, Store};

pub use crate::core::MongoStore;
pub use config::{MONGO_SCHEME, MongoConfig};

/// Opens the store named by `url` (`mongodb://host:port/database?options`, see
/// [`MongoConfig::from_url`]) and checks that the server answers
/// ([`MongoStore::connect`]).
///
/// # Errors
/// [`tern_core::store::ErrorKind::ConfigInvalid`] for a URL that does not parse or names no
/// database; [`tern_core::store::ErrorKind::Unavailable`] when the server does not answer.
/// Messages name the URL with its password masked.
pub async fn open(url: &str) -> Result<Arc<dyn Store>, Error> {
    let config = MongoConfig::from_url(url)?;
    Ok(Arc::new(MongoStore::connect(config).await?))
}
