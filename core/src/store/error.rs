//! The one error type of the store layer.

use std::fmt;

/// What went wrong, in terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The store cannot do this (it lacks the facet, see [`crate::store::features`], or declines this call).
    Unsupported,
    /// The store URL or configuration is invalid.
    ConfigInvalid,
    /// The server could not be reached or the connection broke.
    Unavailable,
    /// The store is in use by another process and admits one at a time (the
    /// embedded store's file lock). For tern this means what a held lease means.
    Busy,
    /// The data in the store cannot be read as tern entities (a corrupt or foreign value).
    InvalidData,
    /// The server refused the request (permissions, limits, a rejected command).
    Rejected,
    /// A cursor that the store can no longer continue from.
    InvalidCursor,
    /// Anything else.
    Unexpected,
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::ConfigInvalid => "invalid configuration",
            ErrorKind::Unavailable => "store unavailable",
            ErrorKind::Busy => "store busy",
            ErrorKind::InvalidData => "invalid data",
            ErrorKind::Rejected => "rejected by the store",
            ErrorKind::InvalidCursor => "invalid cursor",
            ErrorKind::Unexpected => "unexpected store error",
        })
    }
}

/// An error from a store: a kind, a message naming the operation, key/value
/// context (store, kind, key...), the cause as `source`, and whether retrying
/// may help.
///
/// The message describes this layer only and never repeats the source: print
/// with `{:#}` (anyhow) or walk [`std::error::Error::source`] to see the
/// cause. A driver's error is kept as a [`DriverError`] (see
/// [`Error::with_driver_error`]), whose text is the driver's and which chains
/// nothing further.
pub struct Error {
    kind: ErrorKind,
    message: String,
    context: Vec<(&'static str, String)>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    temporary: bool,
}

/// A database driver's error as text: the last cause of a store [`Error`]
/// (see [`Error::with_driver_error`]). It has no source of its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(String);

impl DriverError {
    /// The driver's text.
    pub fn text(&self) -> &str {
        &self.0
    }
}

/// The result type of the store layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            context: Vec::new(),
            source: None,
            temporary: false,
        }
    }

    /// The store cannot do `operation`.
    pub fn unsupported(store: &str, operation: &str) -> Error {
        Error::new(
            ErrorKind::Unsupported,
            format!("{operation} is not supported by the {store} store"),
        )
    }

    /// Adds a key/value pair of context (`"kind"`, `"key"`, `"url"`...).
    #[must_use]
    pub fn with_context(mut self, key: &'static str, value: impl Into<String>) -> Error {
        self.context.push((key, value.into()));
        self
    }

    /// Sets the underlying cause.
    #[must_use]
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    /// Sets a database driver's error as the cause, as its text only (a
    /// [`DriverError`], which chains nothing further).
    ///
    /// The drivers (redis, mongodb, scylla) write their own causes into their
    /// message *and* chain them, so chaining the driver's error would print
    /// the same text two or three times. Pass the part of the driver's error
    /// that says what went wrong (for most drivers its `Display`); the
    /// adapter must not pass text that can hold a password.
    #[must_use]
    pub fn with_driver_error(self, text: impl fmt::Display) -> Error {
        self.with_source(DriverError(text.to_string()))
    }

    /// Marks the error as temporary: retrying the same request may succeed.
    #[must_use]
    pub fn set_temporary(mut self) -> Error {
        self.temporary = true;
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether retrying may help.
    pub fn is_temporary(&self) -> bool {
        self.temporary
    }

    /// The message, without context or source.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The context pairs.
    pub fn context(&self) -> &[(&'static str, String)] {
        &self.context
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)?;
        if !self.context.is_empty() {
            f.write_str(" (")?;
            for (i, (k, v)) in self.context.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k}: {v}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind)
            .field("message", &self.message)
            .field("context", &self.context)
            .field("temporary", &self.temporary);
        if let Some(source) = &self.source {
            d.field("source", &source.to_string());
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|s| s.as_ref() as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_driver_error_is_a_text_leaf_outside_the_message() {
        let err = Error::new(
            ErrorKind::Unavailable,
            "cannot connect to Redis at redis://h:1",
        )
        .with_context("url", "redis://h:1")
        .with_driver_error("Connection refused (os error 111)");
        assert_eq!(
            err.to_string(),
            "store unavailable: cannot connect to Redis at redis://h:1 (url: redis://h:1)"
        );
        let source = std::error::Error::source(&err).unwrap();
        let driver = source.downcast_ref::<DriverError>().unwrap();
        assert_eq!(driver.text(), "Connection refused (os error 111)");
        assert_eq!(source.to_string(), "Connection refused (os error 111)");
        assert!(source.source().is_none());
    }
}
