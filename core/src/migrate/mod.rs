//! The migration engine: migrations, tern's metadata in the store, the lease
//! lock, and the runner of checkpointed, version-scoped batches.
//!
//! Start with [`Migrator`]: give it a store and a [`MigrationSet`], call
//! [`Migrator::up`]. See the README's "Concepts" for the guarantees.
//!
//! The engine sits on top of the layers (docs/design.md, "Layers"): what a
//! migration is and its record in the store (the modules re-exported below from
//! the layer under both the engine and [`crate::lazy`]), then lazy migration (a
//! `lazy` migration is installed through [`crate::lazy::install`]), then this
//! module: the engine ([`engine`]), its batches (`run`), kind renames (`rename`),
//! move and copy by index (`join`) and the dry run's overlay ([`overlay`]).

mod build;
mod changelog;
pub mod engine;
pub(crate) mod join;
mod options;
pub mod overlay;
pub(crate) mod partition;
mod rename;
mod run;

pub use crate::migration::{conflict, error, lease, pace, plan, progress, source, state};

pub use crate::migration::conflict::Conflict;
pub use crate::migration::error::MigrateError;
pub use crate::migration::lease::{Lease, LeaseOptions};
pub use crate::migration::pace::RateLimiter;
pub use crate::migration::progress::{CancelFlag, NoProgress, Progress, StageStart};
#[cfg(feature = "fault-injection")]
pub use crate::migration::progress::{FaultAt, FaultHook, FaultPoint};
pub use crate::migration::report::MigrationReport;
pub use crate::migration::source::{Body, EntityMigration, Migration, MigrationSet};
pub use crate::migration::state::{
    KindRename, LazyRecord, LedgerEntry, PartitionLease, PartitionState, RunCounts, RunState,
    StagePartitions, StateDoc, SweepState,
};
pub use engine::{
    Abandoned, DryRun, KindCensus, MigrationStatus, Migrator, StagePreview, Status, UpReport,
    WorkReport,
};
pub use join::{JoinIndex, Resolved, StoreCheck, check_on_store};
pub use options::RunOptions;
