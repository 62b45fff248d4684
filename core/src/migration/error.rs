//! The error type of the migration layer.

use std::path::PathBuf;

use thiserror::Error;

use crate::store;

/// Something that stops a migration command. Each variant names what to do.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The store failed.
    #[error("store operation failed: {context}")]
    Store {
        /// What tern was doing.
        context: String,
        /// The store's error.
        #[source]
        source: store::Error,
    },
    /// The migrations folder does not exist.
    #[error("migrations folder {} not found; run `tern init` or pass --migrations DIR", .0.display())]
    MissingFolder(PathBuf),
    /// A file in the migrations folder could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file name in the migrations folder is not `NNNN_name.tern`.
    #[error("{}: a migration file is named NNNN_name.tern (digits, an underscore, a name of letters, digits, _ or -); rename it or move it out of the folder", .0.display())]
    BadFileName(PathBuf),
    /// Two migrations share a number.
    #[error("migration number {id} is used twice: {first} and {second}; renumber one of them")]
    DuplicateId {
        /// The number.
        id: u32,
        /// One migration.
        first: String,
        /// The other.
        second: String,
    },
    /// A migration does not parse.
    #[error(transparent)]
    Parse(#[from] crate::lang::ParseError),
    /// A migration parses but cannot run (e.g. a kind rename on a store without support).
    #[error("migration {id} ({name}): {message}")]
    Invalid {
        /// The migration number.
        id: u32,
        /// Its name.
        name: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// An applied migration's file changed since it was applied.
    #[error(
        "migration {id} ({name}) was applied with checksum {applied} but its file now has checksum {current}; \
         applied migrations must not change: restore the file, or write the change as a new migration"
    )]
    ChecksumMismatch {
        /// The migration number.
        id: u32,
        /// Its name.
        name: String,
        /// The checksum in the ledger.
        applied: String,
        /// The checksum of the file now.
        current: String,
    },
    /// The ledger lists a migration that is no longer in the folder.
    #[error(
        "migration {id} ({name}) is recorded as applied but no longer exists in the migrations folder; restore it"
    )]
    MissingApplied {
        /// The migration number.
        id: u32,
        /// Its name.
        name: String,
    },
    /// A pending migration is numbered below an applied one.
    #[error(
        "migration {pending} is pending but migration {applied} is already applied; migrations apply in order: renumber {pending} above {applied}"
    )]
    OutOfOrder {
        /// The pending migration.
        pending: u32,
        /// The highest applied migration.
        applied: u32,
    },
    /// Another runner holds the lease.
    #[error(
        "the migration lock is held by {owner} (token {token}) until {expires_in_ms} ms from now; wait, or use `tern lock --release` once it has expired"
    )]
    LockHeld {
        /// Who holds it.
        owner: String,
        /// Its fencing token.
        token: u64,
        /// Milliseconds until it expires (negative: already expired).
        expires_in_ms: i64,
    },
    /// This runner lost its lease (it expired, or another runner took it over); it stopped without writing.
    #[error(
        "the migration lock was lost (token {token}): another runner took over or the lock was released by force; this run stopped, the other runner continues from the last checkpoint"
    )]
    LeaseLost {
        /// This runner's fencing token.
        token: u64,
    },
    /// A move/copy would write one target from sources with different values.
    #[error("{}", unsafe_message(.statement, .conflicts, .others))]
    Unsafe {
        /// The statement, as text.
        statement: String,
        /// Its conflicting targets, `key: source=value, source=value`.
        conflicts: Vec<String>,
        /// Other unsafe statements of the same check, with their number of
        /// conflicting targets.
        others: Vec<(String, usize)>,
    },
    /// The run was interrupted (Ctrl-C); the last checkpoint holds.
    #[error("interrupted; progress is checkpointed: run `tern up` again to resume")]
    Interrupted,
    /// Entities remained below their target version after the sweeps.
    #[error(
        "{count} entities of kind {kind} are still below version {target} after {passes} sweeps: an application keeps writing entities of the old version; stop it or run `tern up` again"
    )]
    CensusFailed {
        /// The kind.
        kind: String,
        /// The version all entities should have reached.
        target: u64,
        /// How many are below it.
        count: u64,
        /// How many sweeps ran.
        passes: u32,
    },
    /// A kind rename that would overwrite or lose data: the new name is in use,
    /// or entities of the old kind have namesakes under the new one. Nothing was
    /// overwritten; a run stopped by it resumes once the cause is removed.
    #[error("cannot rename kind {from} to {to}: {reason}")]
    RenameKindRefused {
        /// The old kind.
        from: String,
        /// The new kind.
        to: String,
        /// Why, and what to do.
        reason: String,
    },
    /// An interrupted run of a different migration (or of an edited one) is recorded.
    #[error("{0}")]
    Dirty(String),
    /// A migration written in Rust failed on an entity.
    #[error("migration {id} failed on {key}: {message}")]
    Transform {
        /// The migration number.
        id: u32,
        /// The entity.
        key: String,
        /// The transform's message.
        message: String,
    },
    /// A crash injected by a test's fault hook: the run stopped as if the process died.
    #[cfg(feature = "fault-injection")]
    #[error("injected crash at {0}")]
    InjectedCrash(String),
    /// The metadata in the store is not tern's (or is from an incompatible version).
    #[error("tern's metadata document {name:?} in the store is unreadable: {message}")]
    CorruptMetadata {
        /// The document name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

fn unsafe_message(statement: &str, conflicts: &[String], others: &[(String, usize)]) -> String {
    let shown: Vec<&str> = conflicts.iter().take(10).map(String::as_str).collect();
    let more = conflicts.len().saturating_sub(shown.len());
    let mut msg = format!(
        "unsafe migration refused: `{statement}` writes {} target(s) from sources with different values ([SE] Proposition 2):\n  {}",
        conflicts.len(),
        shown.join("\n  ")
    );
    if more > 0 {
        msg.push_str(&format!("\n  ... and {more} more"));
    }
    for (other, n) in others {
        msg.push_str(&format!(
            "\nalso unsafe: `{other}` writes {n} target(s) from sources with different values"
        ));
    }
    msg.push_str("\nmake the join select one source per target, or pass --force-unsafe to let the greatest source key win");
    msg
}

impl MigrateError {
    /// Wraps a store error with what tern was doing.
    pub fn store(context: impl Into<String>) -> impl FnOnce(store::Error) -> MigrateError {
        let context = context.into();
        move |source| MigrateError::Store { context, source }
    }

    /// The process exit code the CLI uses for this error (see the README).
    pub fn exit_code(&self) -> u8 {
        match self {
            MigrateError::LockHeld { .. } => EXIT_LOCKED,
            MigrateError::ChecksumMismatch { .. } => EXIT_CHECKSUM,
            MigrateError::Unsafe { .. } => EXIT_UNSAFE,
            MigrateError::Interrupted => EXIT_INTERRUPTED,
            _ => EXIT_ERROR,
        }
    }
}

/// Exit code: an error without a code of its own.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: the lock is held by another runner.
pub const EXIT_LOCKED: u8 = 3;
/// Exit code: an applied migration's file was edited.
pub const EXIT_CHECKSUM: u8 = 4;
/// Exit code: an unsafe move or copy was refused.
pub const EXIT_UNSAFE: u8 = 5;
/// Exit code: interrupted (Ctrl-C), as a shell reports SIGINT.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The result type of the migration layer.
pub type Result<T, E = MigrateError> = std::result::Result<T, E>;

/// The refusal to rename `from` to `to`, for `reason`.
pub(crate) fn rename_refused(from: &str, to: &str, reason: String) -> MigrateError {
    MigrateError::RenameKindRefused {
        from: from.to_owned(),
        to: to.to_owned(),
        reason,
    }
}
