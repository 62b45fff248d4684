//! Errors and warnings, each at a line and column of the input.

use serde::Serialize;

/// A place in the input file (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize)]
pub struct Span {
    /// Line, from 1.
    pub line: u32,
    /// Column (in characters), from 1.
    pub col: u32,
}

/// A problem that stops the analysis: bad syntax or an inconsistent grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{}:{}: {message}", span.line, span.col)]
pub struct Error {
    /// Where.
    pub span: Span,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl Error {
    pub(crate) fn new(span: Span, message: impl Into<String>) -> Self {
        Error {
            span,
            message: message.into(),
        }
    }
}

/// A problem that does not stop the analysis (e.g. a write to a key the grammar never produces).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// Where.
    pub span: Span,
    /// What looks wrong.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.span.line, self.span.col, self.message)
    }
}
