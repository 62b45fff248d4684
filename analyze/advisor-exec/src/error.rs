//! Errors of the advisor's store side.

/// What can go wrong while loading, executing or calibrating on a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] tern_core::store::Error),
    /// A generated key is not a valid tern key (a kind prefix with control characters).
    #[error(transparent)]
    Key(#[from] tern_core::model::KeyError),
    /// A plan step's partition key is neither a parameter nor known from an earlier step.
    #[error("a plan step's partition key is not known (kind {0})")]
    UnknownPartitionKey(String),
    /// A recommended column family is not among the advisor's candidates.
    #[error("the recommended column family {0} is not among the candidates")]
    NotACandidate(String),
    /// A calibration partition read back with a different number of rows than written.
    #[error("calibration partition {id} read back {got} rows, not {want}")]
    Readback {
        /// The partition's id.
        id: String,
        /// Rows read.
        got: usize,
        /// Rows written.
        want: usize,
    },
    /// The calibration samples determine no cost model.
    #[error("the calibration samples determine no cost model")]
    NoFit,
    /// The scratch entities could not be removed.
    #[error(
        "could not remove the scratch kind `{kind}`{after}: delete its entities by hand ({source})"
    )]
    Cleanup {
        /// The scratch kind (or kind prefix).
        kind: String,
        /// ` after the calibration failed (...)` or empty.
        after: String,
        /// The store's error.
        source: tern_core::store::Error,
    },
}

/// The result type of this crate.
pub type Result<T, E = ExecError> = std::result::Result<T, E>;
