//! What a migration is and the record of migrations in the store: the layer under
//! both the eager engine ([`crate::migrate`]) and lazy migration ([`crate::lazy`]).
//!
//! - [`source`]: migrations as written (scripts, code) and the set of them;
//! - [`directive`]: the `lazy` first line of a migration file;
//! - [`plan`]: a migration compiled to version steps and stages;
//! - [`apply`]: applying steps to one entity (in tern, or pushed down to the store);
//! - [`state`]: tern's state document (ledger, runs, lazy records) and its fenced writes;
//! - [`report`]: what one migration's run did and its ledger entry;
//! - [`lease`]: the lock every writer of the state document holds;
//! - `fenced`: the compare-and-set loops of a lease's holder and a partition's worker;
//! - [`progress`], [`pace`]: cancellation, progress callbacks and the rate limiter;
//! - [`conflict`]: unsafe move/copy targets; [`error`]: [`MigrateError`](error::MigrateError).
//!
//! Dependencies run one way: `migrate` uses `lazy` and this layer, `lazy` uses this
//! layer, and nothing here uses either (docs/design.md, "Layers").

pub(crate) mod apply;
pub mod conflict;
pub mod directive;
pub mod error;
pub(crate) mod fenced;
pub mod lease;
pub mod pace;
pub mod plan;
pub mod progress;
pub(crate) mod report;
pub mod source;
pub mod state;
