//! A reply of a command the module ran, copied out of the server.

/// A reply of a command the module called, copied out of the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Nil (absent key, missing field).
    Nil,
    /// An integer.
    Int(i64),
    /// A string (bulk or simple).
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Reply>),
    /// An error reply, or a call that could not run (the text says why).
    Error(String),
}
