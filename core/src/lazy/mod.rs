//! Lazy migration: migrate on access, atomically, on every store (\[KV\]).
//!
//! A migration file whose first line is `lazy` is *installed* by `tern up`
//! instead of run: its spec (canonical statements) and the kinds' new logical
//! versions are written in one fenced compare-and-set of tern's state
//! document, and no entity is touched ([`install`]).
//! Applications then read and write through a [`LazyClient`], which brings
//! each stale entity up to date when it is accessed, atomically with the
//! access. A [`sweep`](sweep::sweep) migrates the rest and records the lazy
//! migration complete; [`status::retire`] then retires its spec.
//!
//! The contract (logical consistency): any sequence of operations by
//! up-to-date clients gives the same results as if the store had been
//! migrated eagerly at the install. See docs/lazy.md for each requirement
//! and how every store meets it.
//!
//! ```
//! use std::sync::Arc;
//! use tern_core::lazy::LazyClient;
//! use tern_core::model::{Key, Map, Value};
//! use tern_core::store::{Store, memory::MemoryStore};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
//! let client = LazyClient::builder(store).declare("user", 0).connect().await?;
//! let key = Key::new("user", 1)?;
//! let mut value = Map::new();
//! value.insert("name".to_owned(), Value::from("ada"));
//! client.put(&key, value).await?;
//! assert!(client.get(&key).await?.is_some());
//! # Ok(()) }
//! ```

mod client;
mod error;
pub mod install;
pub mod spec;
pub mod status;
pub mod sweep;

/// The `lazy` first line of a migration file (in the layer under `lazy` and `migrate`).
pub use crate::migration::directive;

pub use client::{DEFAULT_REFRESH, LazyClient, LazyClientBuilder, LazyStats};
pub use error::{LazyError, Result};
pub use spec::{KindChain, Spec};
pub use status::{KindLazyStatus, RenamedAway, renamed_away, retire, status};
pub use sweep::{SweepOptions, SweepReport};
