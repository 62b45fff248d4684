//! A statement with its bound values, kept so that it can be run again (a retried write).

use scylla::value::CqlValue;

/// CQL text and its values (`None`: null).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// The statement (prepared once per session).
    pub(crate) cql: String,
    /// Its bound values, in order.
    pub(crate) values: Vec<Option<CqlValue>>,
}
