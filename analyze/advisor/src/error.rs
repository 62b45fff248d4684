//! Errors of the advisor: input errors carry file:line:col.

use std::fmt;

/// A place in an input file (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The file name as given by the caller.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// Everything that can go wrong in `tern advise`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdvisorError {
    /// A model or workload file does not parse or refers to something missing.
    #[error("{span}: {message}")]
    Input {
        /// Where the problem is.
        span: Span,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// No schema satisfies the constraints (for example the space budget).
    #[error("no solution: {0}")]
    NoSolution(String),
    /// The solver failed for another reason.
    #[error("solver failed: {0}")]
    Solver(String),
    /// A mix named on the command line is not used by the workload.
    #[error("unknown workload mix `{0}`: the workload's groups name the mixes {1}")]
    UnknownMix(String, String),
    /// The caller's interrupt ([`crate::budget::Interrupt`]) stopped the run.
    #[error("interrupted: the advisor stopped before it had an answer")]
    Cancelled,
    /// This build has no solver (tern-advisor without its `cbc` feature).
    #[error(
        "this tern was built without the CBC solver, which `tern advise` needs: install the system library \
         (Debian/Ubuntu: `apt-get install coinor-libcbc-dev pkg-config`, or `scripts/deps.sh`), then rebuild with \
         the default features (`cargo install --path cli`)"
    )]
    NoSolver,
    /// Writing output files failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl AdvisorError {
    pub(crate) fn input(span: &Span, message: impl Into<String>) -> Self {
        AdvisorError::Input {
            span: span.clone(),
            message: message.into(),
        }
    }
}

/// Result alias of the advisor.
pub type Result<T> = std::result::Result<T, AdvisorError>;
