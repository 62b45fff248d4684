//! The errors of lazy migration.

use thiserror::Error;

use crate::migration::error::MigrateError;
use crate::model::{Key, Version};

/// What can go wrong when reading or writing through a [`super::LazyClient`],
/// installing or sweeping. Every refusal is an error, never data in a format
/// the application code does not know.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LazyError {
    /// The client declared an older version of a kind than the store's.
    #[error(
        "this client was written for {kind} v{declared}, but the store is at v{current}; \
         deploy the code written for v{current} (a client may not read or write a kind in an older format)"
    )]
    ClientOutdated {
        /// The kind.
        kind: String,
        /// The version the client declared.
        declared: Version,
        /// The store's logical version.
        current: Version,
    },
    /// The client declared a version the store has not reached.
    #[error(
        "this client was written for {kind} v{declared}, but the store is at v{current}; \
         run `tern up` first (install the migrations this code expects)"
    )]
    ClientAhead {
        /// The kind.
        kind: String,
        /// The version the client declared.
        declared: Version,
        /// The store's logical version.
        current: Version,
    },
    /// A migration of a kind this client uses was installed after it connected.
    #[error(
        "{kind} was migrated to v{current} after this client connected (written for v{declared}); \
         reconnect with code written for v{current}"
    )]
    KindMigratedSinceConnect {
        /// The kind.
        kind: String,
        /// The version the client declared.
        declared: Version,
        /// The store's logical version now.
        current: Version,
    },
    /// A stored entity is at a version newer than the client's.
    #[error(
        "{key} is stored at v{version}, newer than the v{declared} this client was written for; \
         deploy newer code (the entity is left untouched)"
    )]
    EntityNewer {
        /// The entity.
        key: Key,
        /// Its stored version.
        version: Version,
        /// The client's version of its kind.
        declared: Version,
    },
    /// A stored entity's version tag names no step tern knows of.
    #[error(
        "{key} is stored at v{version}, but the store's ledger has no step of {kind} after it up to v{declared}; \
         the entity was written by something other than tern (fix its version property)"
    )]
    UnknownTag {
        /// The entity.
        key: Key,
        /// The kind.
        kind: String,
        /// Its stored version.
        version: Version,
        /// The client's version of its kind.
        declared: Version,
    },
    /// The client did not declare this kind, and the kind has been migrated.
    #[error(
        "{kind} is not declared by this client but has been migrated (v{current}); \
         declare it with the version your code was written for"
    )]
    UndeclaredKind {
        /// The kind.
        kind: String,
        /// The store's logical version.
        current: Version,
    },
    /// The kind was renamed by a lazy migration that is not complete.
    #[error(
        "{kind} was renamed to {to} by a lazy migration that is still pending; use {to} \
         (its entities are still partly stored under {kind})"
    )]
    KindRenamedAway {
        /// The old name.
        kind: String,
        /// The new name.
        to: String,
    },
    /// An entity is below a step that only the eager engine can run.
    #[error(
        "{key} is at v{version}, below a step that reads other entities ({step}); run `tern up` / `tern sweep`"
    )]
    NeedsEagerStep {
        /// The entity.
        key: Key,
        /// Its stored version.
        version: Version,
        /// The step, as text.
        step: String,
    },
    /// A lazy step is written in Rust and this client did not register it.
    #[error(
        "migration {migration} ({name}) is a Rust transform of {kind}; register it with \
         `LazyClientBuilder::code` to migrate entities through it"
    )]
    MissingCode {
        /// The migration.
        migration: u32,
        /// Its name.
        name: String,
        /// The kind it transforms.
        kind: String,
    },
    /// A transform refused an entity.
    #[error("migrating {key} failed: {message}")]
    Transform {
        /// The entity.
        key: Key,
        /// Why.
        message: String,
    },
    /// A write of the entity did not apply because other writers got in
    /// first: they kept changing it between our read and our write (a
    /// migration's write-back, a read-modify-write), or the store refused a
    /// put or delete of it as conflicting. Nothing of the write is in the store.
    #[error(
        "{key} was not written: other writers changed it meanwhile (tries: {attempts}); \
         nothing was written, retry the operation"
    )]
    Contention {
        /// The entity.
        key: Key,
        /// How many times the write was tried.
        attempts: u32,
    },
    /// The store cannot write an entity under a new kind name and remove the
    /// stale copy under the old one atomically.
    #[error(
        "the {store} store cannot write several keys atomically, which a lazy kind rename needs; \
         run the migration eagerly (remove the `lazy` line)"
    )]
    NoAtomicWrites {
        /// The store's scheme.
        store: String,
    },
    /// A sweep was interrupted (Ctrl-C, SIGTERM) after a batch's checkpoint.
    #[error("interrupted; the sweep is checkpointed: run `tern sweep` again to resume")]
    Interrupted,
    /// The store's metadata (tern's state, the ledger) could not be used.
    #[error(transparent)]
    Migrate(#[from] MigrateError),
    /// A store operation failed.
    #[error("store operation failed: {0}")]
    Store(#[from] crate::store::Error),
}

impl LazyError {
    /// The process exit code for this error (as [`MigrateError::exit_code`]):
    /// 130 interrupted, 3 the lock held by another runner, the migration
    /// error's own code, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            LazyError::Interrupted => crate::migration::error::EXIT_INTERRUPTED,
            LazyError::Migrate(m) => m.exit_code(),
            LazyError::Store(s) if s.kind() == crate::store::ErrorKind::Busy => {
                crate::migration::error::EXIT_LOCKED
            }
            _ => crate::migration::error::EXIT_ERROR,
        }
    }
}

/// The result type of lazy migration.
pub type Result<T, E = LazyError> = std::result::Result<T, E>;
