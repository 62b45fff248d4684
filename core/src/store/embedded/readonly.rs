//! A store file without write permission opens read-only: the commands that
//! only read (`status`, `verify`, `export`, `plan`, `lock`) work on it, and a
//! write is refused with [`ErrorKind::Rejected`] naming the file.

use redb::{Database, ReadOnlyDatabase, ReadableDatabase};

use super::{Error, ErrorKind, Result, map_redb};

/// The open database: writable, or read-only when the file's permissions say so.
pub(super) enum Db {
    /// Opened for reading and writing.
    Writable(Database),
    /// Opened for reading only.
    ReadOnly(ReadOnlyDatabase),
}

impl Db {
    pub(super) fn begin_read(
        &self,
    ) -> std::result::Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Db::Writable(db) => db.begin_read(),
            Db::ReadOnly(db) => db.begin_read(),
        }
    }

    pub(super) fn writable(&self, location: &str) -> Result<&Database> {
        match self {
            Db::Writable(db) => Ok(db),
            Db::ReadOnly(_) => Err(Error::new(
                ErrorKind::Rejected,
                "the store file is read-only (its permissions): this command writes; make the file writable, or work on a copy",
            )
            .with_context("store", location.to_owned())),
        }
    }

    pub(super) fn is_read_only(&self) -> bool {
        matches!(self, Db::ReadOnly(_))
    }
}

/// Whether the file at `path` exists without write permission.
pub(super) fn file_is_read_only(path: &std::path::Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.permissions().readonly())
}

/// Opens `path` read-only.
pub(super) fn open(builder: &redb::Builder, path: &std::path::Path, location: &str) -> Result<Db> {
    builder
        .open_read_only(path)
        .map(Db::ReadOnly)
        .map_err(|e| map_redb(e, "cannot open the read-only file", location))
}
