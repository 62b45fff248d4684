//! The migration engine: migrations, tern's metadata in the store, the lease
//! lock, and the runner of checkpointed, version-scoped batches.
//!
//! Start with [`Migrator`]: give it a store and a [`MigrationSet`], call
//! [`Migrator::up`]. See the README's "Concepts" for the guarantees.

mod changelog;
pub mod conflict;
pub mod engine;
pub mod error;
mod flat_table;
pub(crate) mod join_index;
pub mod lazy_install;
pub mod lease;
pub mod overlay;
pub mod pace;
mod partition;
pub mod plan;
pub mod progress;
mod rename;
mod run;
pub mod source;
pub mod state;

pub use conflict::Conflict;
pub use engine::{
    Abandoned, DryRun, KindCensus, MigrationReport, MigrationStatus, Migrator, StagePreview,
    Status, UpReport, WorkReport,
};
pub use error::MigrateError;
pub use join_index::{JoinIndex, Resolved, StoreCheck, check_on_store};
pub use lease::{Lease, LeaseOptions};
pub use pace::RateLimiter;
#[cfg(feature = "fault-injection")]
pub use progress::FaultHook;
pub use progress::{CancelFlag, FaultAt, FaultPoint, NoProgress, Progress};
pub use run::RunOptions;
pub(crate) use run::{apply_per_entity, pushdown_steps};
pub use source::{Body, EntityMigration, Migration, MigrationSet};
pub use state::{
    KindRename, LazyRecord, LedgerEntry, PartitionLease, PartitionState, RunCounts, RunState,
    StagePartitions, StateDoc, SweepState,
};
