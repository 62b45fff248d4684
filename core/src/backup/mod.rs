//! Export and import that are a backup: the entities and tern's state.
//!
//! `tern export` writes JSON Lines, one entity a line, sorted by kind then id
//! ([`export`]). When the store has tern state (kind versions, the ledger of
//! applied migrations, kind renames, lazy migrations), the first line is that
//! state ([`SavedState`], `{"tern_state": {...}}`), so an export of a migrated
//! store imports into an **empty** store as the same store: export → import
//! into a new store → export gives the same file. [`Importer`] reads the lines:
//! it restores the state into an empty store, accepts it where the store
//! already has exactly that state (a re-run of an interrupted import), and
//! refuses it, with the reason, anywhere else. Files without a state line (all
//! exports of earlier versions, and exports of stores no migration touched)
//! import as before, checked against the store's own state.
//!
//! The one design choice a reader must know: an export never holds a whole kind
//! in memory. A store that scans in id order
//! ([`Features::scan_ordered`](crate::store::Features::scan_ordered)) is
//! written as it is read; any other is sorted by an external merge sort
//! ([`spill`]): sorted runs of at most [`ExportOptions::sort_memory`] bytes are
//! written to temporary files and merged, so memory is bounded by the budget
//! and not by the size of the kind.

mod export;
mod import;
mod saved;
pub mod spill;

pub use export::{ExportOptions, ExportReport, export};
pub use import::{ImportLine, ImportOptions, Importer};
pub use saved::{RestoredState, STATE_LINE_FIELD, SavedState, restore_state, saved_state};

/// Why an export or import stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackupError {
    /// A store call failed.
    #[error("{action}")]
    Store {
        /// What tern was doing.
        action: String,
        /// The store's error.
        #[source]
        source: crate::store::Error,
    },
    /// Reading or writing tern's state failed.
    #[error("tern's state")]
    State(#[from] crate::migration::error::MigrateError),
    /// Writing the export or a temporary sort file failed.
    #[error("{action}")]
    Io {
        /// What tern was writing.
        action: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A migration is running or was interrupted: its entities are between
    /// versions, and its checkpoint belongs to this store only.
    #[error(
        "migration {migration} is in progress (running, or interrupted at stage {stage}): its entities are \
         between versions, so an export now is not a backup of a consistent store; finish it (`tern up`) or \
         drop it (`tern abandon`) and export again, or export the entities alone (`--no-state`)"
    )]
    InProgress {
        /// The migration.
        migration: u32,
        /// Its stage.
        stage: usize,
    },
    /// tern's state changed while the export read the entities.
    #[error(
        "tern's state changed during the export (a migration ran or a lazy migration was installed): the \
         entities read may be from before and after it; export again"
    )]
    ChangedDuringExport,
    /// The state of an import file cannot be put into this store.
    #[error("{0}")]
    StateRefused(String),
    /// One line of an import file is not valid (the message, without the file's name).
    #[error("{0}")]
    Line(String),
}

impl BackupError {
    /// A store error while `action`.
    pub(crate) fn store(
        action: impl Into<String>,
    ) -> impl FnOnce(crate::store::Error) -> BackupError {
        let action = action.into();
        move |source| BackupError::Store { action, source }
    }

    /// An I/O error while `action`.
    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
        let action = action.into();
        move |source| BackupError::Io { action, source }
    }
}
