//! # tern-core
//!
//! The foundation of tern, the schema-evolution tool for NoSQL stores:
//!
//! - [`model`]: the data model ([`model::Value`], [`model::Key`], [`model::Entity`]);
//! - [`store`]: the async [`store::Store`] interface every backend implements (a
//!   small required core), the optional facets a store hands out
//!   ([`store::Features`]), and the embedded store that needs no server;
//! - [`lang`]: the declarative evolution language of Scherzinger, Klettke and Störl
//!   (add, delete, rename, move, copy) with its parser, printer and reference semantics;
//! - [`migrate`]: the migration engine (eager runs, the lease, dry runs);
//! - [`lazy`]: the lazy client, which migrates entities as the application reads
//!   and writes them ([`lazy::LazyClient`]), and the sweep that finishes a lazy
//!   migration in the background.
//!
//! The design choice a reader must know: every entity carries a **version** that
//! counts the *version steps* of its kind it has been through. Each statement that
//! writes a kind is one step of that kind, and every entity of the kind passes
//! through every step (its data changes only where it matches). That makes a
//! resumed migration exact, lets a lazy read apply exactly the pending steps, and
//! lets a census prove a kind finished.
#![deny(missing_docs)]

pub mod backup;
pub mod lang;
pub mod lazy;
pub mod migrate;
mod migration;
pub mod model;
#[cfg(feature = "plot")]
pub mod plot;
pub mod store;
pub mod telemetry;
