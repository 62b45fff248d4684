//! The embedded store: a persistent, crash-safe [`Store`] in one file, on
//! [redb](https://docs.rs/redb), needing no server (`embedded:PATH`).
//!
//! # Layout
//!
//! - Table `tern_entities`: [`encode_key`](crate::model::keycode::encode_key) of the key (kind, then id, in an
//!   order-preserving, prefix-free encoding) → the entity's version, id and
//!   value in a compact canonical binary form (see `codec.rs`). The entities
//!   of a kind are contiguous and sorted by id, so a scan is a range read and
//!   its cursor is the last key it examined (hex).
//! - Table `tern_meta`: metadata name → (revision, JSON text). A table of its
//!   own, so metadata never shows up as a kind.
//!
//! [`Store::kinds`] needs no table of its own: it seeks from one kind's key
//! prefix straight past the last key of that kind, one lookup per kind.
//!
//! # Durability and atomicity
//!
//! Every [`Store::write_batch`], [`AtomicBatchWithMeta::write_batch_with_meta`],
//! [`Pushdown::update_in_place`] and [`Store::meta_cas`] call is one redb write
//! transaction, committed with
//! [`redb::Durability::Immediate`] (redb's default): when the call returns,
//! the batch is on disk (fsync), and a crash at any moment leaves each batch
//! either wholly present or wholly absent. That is stronger than the
//! [`Store`] contract (each write atomic on its own), hence the
//! [`AtomicBatchWithMeta`] and [`AtomicWrites`] facets. A batch, not each entity, pays the fsync, so
//! large batches are what make bulk writes fast. Because
//! [`AtomicBatchWithMeta::write_batch_with_meta`] is atomic, the engine commits each batch
//! of the client-side path together with its checkpoint: one fsync per
//! batch, and no batch on disk without its checkpoint.
//!
//! After a crash, redb repairs the file on the next open by walking it, which
//! takes a while for a large file; nothing is lost.
//!
//! # Concurrency
//!
//! redb allows one write transaction at a time and any number of readers,
//! which see a consistent snapshot. One process at a time may open the file:
//! a second open fails with [`ErrorKind::Busy`] naming the path. The
//! blocking redb calls run on tokio's blocking thread pool when called inside
//! a tokio runtime (and inline otherwise), so they never stall the async workers.
//!
//! # Memory
//!
//! redb keeps a page cache (reads, and the write buffer of a transaction, at
//! most half of it): [`DEFAULT_CACHE_BYTES`] (32 MiB) unless
//! [`EmbeddedOptions::cache_bytes`] or the URL (`embedded:PATH?cache_mb=N`)
//! says otherwise; redb's own default of 1 GiB would let a long scan of a
//! large file take that much.
#![doc = include_str!("docs.md")]

mod guard;
mod ops;
mod readonly;

pub use guard::quiet_panic_hook;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use redb::TableDefinition;

use super::{
    AtomicBatchWithMeta, AtomicScope, AtomicWrites, BatchMetaOutcome, CountEstimate, Error,
    ErrorKind, Features, Filter, KindRename, MetaCas, MetaChange, MetaEntry, MetaUpdate,
    ProjectedScan, Pushdown, PushdownPage, PushdownRequest, RenameKindPage, RenameKindRequest,
    Result, ScanPage, ScanRequest, Store, StoreInfo, Write, WriteOutcome,
};
use crate::model::{Entity, Key};

/// The URL scheme of the embedded store.
pub const EMBEDDED_SCHEME: &str = "embedded";

/// Encoded key → encoded entity.
const ENTITIES: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("tern_entities");
/// Metadata name → (revision, JSON text).
const META: TableDefinition<'static, &str, (u64, &str)> = TableDefinition::new("tern_meta");

/// redb's page cache of an embedded store unless [`EmbeddedOptions`] say
/// otherwise: 32 MiB. redb's own default is 1 GiB, which dominated the memory
/// of a `tern up` over 1M entities; with 64 MiB a move/copy over 1M entities
/// (its 64 MiB join index beside the cache) peaked just over 200 MB, with 32
/// MiB it peaks at 150-175 MB and runs as fast (docs/benchmarks.md, "redb's
/// page cache" and "Move and copy by index").
pub const DEFAULT_CACHE_BYTES: usize = 32 << 20;

/// How an embedded store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddedOptions {
    /// The most memory redb's page cache takes, in bytes (reads and the write
    /// buffer together; the write buffer is at most half of it).
    pub cache_bytes: usize,
}

impl EmbeddedOptions {
    /// Splits the part of an `embedded:` URL after the scheme into the file
    /// and the options of its query: `PATH?cache_mb=N` sets redb's page cache
    /// to N MiB (at least 1); without a query, the defaults. A file name
    /// cannot hold a `?`.
    ///
    /// # Errors
    /// [`ErrorKind::ConfigInvalid`] for an unknown option or a bad number.
    pub fn split_url(rest: &str) -> Result<(&str, EmbeddedOptions)> {
        let mut options = EmbeddedOptions::default();
        let Some((path, query)) = rest.split_once('?') else {
            return Ok((rest, options));
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let bad = || {
                Error::new(
                    ErrorKind::ConfigInvalid,
                    format!(
                        "embedded store option {pair:?}: the only option is cache_mb=N (redb's page cache in MiB, default {})",
                        DEFAULT_CACHE_BYTES >> 20
                    ),
                )
            };
            match pair.split_once('=') {
                Some(("cache_mb", n)) => {
                    let mb: usize = n.parse().ok().filter(|mb| *mb > 0).ok_or_else(bad)?;
                    options.cache_bytes = mb.checked_mul(1 << 20).ok_or_else(bad)?;
                }
                _ => return Err(bad()),
            }
        }
        Ok((path, options))
    }
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            cache_bytes: DEFAULT_CACHE_BYTES,
        }
    }
}

/// The embedded store: entities and metadata in one redb file.
///
/// Cheap to clone; clones share the open database, which closes when the last
/// clone is dropped. See the [module docs](self) for layout and guarantees.
#[derive(Clone)]
pub struct EmbeddedStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: readonly::Db,
    path: PathBuf,
    location: String,
    /// redb repaired the file when it was opened: it was not closed cleanly.
    repaired: bool,
}

impl fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbeddedStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl EmbeddedStore {
    /// Opens the store in the file at `path`, creating the file if it is missing.
    ///
    /// Blocks while redb opens the file (and repairs it after a crash).
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] naming the path when the file cannot be opened or
    /// created; [`ErrorKind::Busy`] when it is already open (by this or another process);
    /// [`ErrorKind::InvalidData`] when it is not a redb file or is corrupt.
    pub fn open(path: impl AsRef<Path>) -> Result<EmbeddedStore> {
        EmbeddedStore::open_with(path, EmbeddedOptions::default())
    }

    /// As [`EmbeddedStore::open`], with `options` (the page cache's size).
    ///
    /// # Errors
    /// As [`EmbeddedStore::open`].
    pub fn open_with(path: impl AsRef<Path>, options: EmbeddedOptions) -> Result<EmbeddedStore> {
        EmbeddedStore::open_inner(path.as_ref(), options, false)
    }

    /// As [`EmbeddedStore::open_with`], then checks the whole file against
    /// redb's page checksums (`Database::check_integrity`, a read of every
    /// page): what `tern verify`, `export` and `import` do, so that a
    /// corrupted file is reported instead of exported or verified silently
    /// wrong. A read-only file is opened unchecked (the check may repair).
    ///
    /// # Errors
    /// As [`EmbeddedStore::open`]; [`ErrorKind::InvalidData`] naming the file
    /// when a checksum does not match, or when the check had to repair the
    /// file (its newest commit rolled back to the last intact one).
    pub fn open_checked(path: impl AsRef<Path>, options: EmbeddedOptions) -> Result<EmbeddedStore> {
        EmbeddedStore::open_inner(path.as_ref(), options, true)
    }

    fn open_inner(path: &Path, options: EmbeddedOptions, check: bool) -> Result<EmbeddedStore> {
        let path = path.to_path_buf();
        let mut builder = redb::Builder::new();
        builder.set_cache_size(options.cache_bytes);
        // redb repairs a file that was not closed cleanly (a crash, a kill)
        // while it opens it; such a file is then checked page by page.
        let repair = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&repair);
        builder
            .set_repair_callback(move |_| flag.store(true, std::sync::atomic::Ordering::Relaxed));
        let repaired = || repair.load(std::sync::atomic::Ordering::Relaxed);
        let location = format!("{EMBEDDED_SCHEME}:{}", path.display());
        let read_only = readonly::file_is_read_only(&path);
        let db = guard::guarded(&location, || {
            if read_only {
                return readonly::open(&builder, &path, &location);
            }
            builder
                .create(&path)
                .map_err(|e| {
                let e = redb::Error::from(e);
                // The location (in the context) names the file.
                let message = match e {
                    redb::Error::DatabaseAlreadyOpen => {
                        "cannot open the file: it is in use by another process (a running tern?); \
                     the embedded store admits one process at a time"
                    }
                    _ => "cannot open the file",
                };
                map_redb(e, message, &location)
            })
            .and_then(|db| {
                if check || repaired() {
                    checked(db, &location).map_err(|e| after_repair(e, repaired()))
                } else {
                    Ok(db)
                }
            })
            .map(readonly::Db::Writable)
        })?;
        let inner = Inner {
            db,
            path,
            location,
            repaired: repaired(),
        };
        if !inner.db.is_read_only() {
            guard::guarded(&inner.location, || inner.create_tables())?;
        }
        Ok(EmbeddedStore {
            inner: Arc::new(inner),
        })
    }

    /// The path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Whether the file was not closed cleanly (a crash, a kill, a power
    /// loss) and redb repaired it when this store opened it. Such a file is
    /// then checked against its page checksums before it is used, so an open
    /// store that says so passed the check: its committed writes are intact,
    /// and a write transaction under way at the crash was rolled back.
    pub fn was_repaired(&self) -> bool {
        self.inner.repaired
    }

    /// Runs `f` on tokio's blocking pool when inside a runtime, else inline.
    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => handle
                .spawn_blocking(move || guard::guarded(&inner.location.clone(), || f(&inner)))
                .await
                .map_err(|e| {
                    Error::new(ErrorKind::Unexpected, "an embedded store task failed")
                        .with_context("store", self.inner.location.clone())
                        .with_source(e)
                })?,
            Err(_) => guard::guarded(&inner.location.clone(), || f(&inner)),
        }
    }
}

/// What to do about a corrupted store file.
const CORRUPTED_FIX: &str = "restore the file from a backup (or a new store from your last `tern export`); \
     do not trust an export or a verify of this file";

/// `db` once redb's integrity check passes: every page's checksum matches.
fn checked(mut db: redb::Database, location: &str) -> Result<redb::Database> {
    match db.check_integrity() {
        Ok(true) => Ok(db),
        Ok(false) => Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "the store file is corrupted: its integrity check failed and redb repaired it to its last intact commit, \
                 so its newest writes may be lost; {CORRUPTED_FIX}"
            ),
        )
        .with_context("store", location)),
        Err(e) => Err(map_redb(
            e,
            format!("the store file is corrupted (redb's page checksums do not match); {CORRUPTED_FIX}"),
            location,
        )),
    }
}

/// `e`, saying that the file was repaired after an unclean shutdown when it was.
fn after_repair(e: Error, repaired: bool) -> Error {
    if repaired {
        e.with_context(
            "found",
            "after the file was not closed cleanly (a crash or a kill) and redb repaired it",
        )
    } else {
        e
    }
}

/// Maps a redb error to a store error with `message` naming the operation.
fn map_redb(e: impl Into<redb::Error>, message: impl Into<String>, location: &str) -> Error {
    let e = e.into();
    let kind = match &e {
        redb::Error::DatabaseAlreadyOpen => ErrorKind::Busy,
        redb::Error::Io(_) | redb::Error::PreviousIo | redb::Error::DatabaseClosed => {
            ErrorKind::Unavailable
        }
        redb::Error::Corrupted(_) | redb::Error::UpgradeRequired(_) => ErrorKind::InvalidData,
        redb::Error::ValueTooLarge(_) => ErrorKind::Rejected,
        _ => ErrorKind::Unexpected,
    };
    Error::new(kind, message)
        .with_context("store", location)
        .with_source(e)
}

#[async_trait]
impl Store for EmbeddedStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: EMBEDDED_SCHEME,
            location: self.inner.location.clone(),
        }
    }

    /// - filters: the "server" of the embedded store is this process; the
    ///   filter is evaluated next to the data, inside the read transaction, and
    ///   the version filter before the value is even decoded, so no
    ///   non-matching entity is materialized for the caller.
    /// - `scan_ordered`: scans follow the key order of the table (ids in
    ///   [`Value`](crate::model::Value) order), each entity once.
    /// - a replace compares the stored bytes with the
    ///   encoding of `expected`; the encoding is canonical, so that is exact
    ///   equality of version and value.
    /// - `pushdown`: each batch is one write transaction in this process.
    /// - `kind_rename`: each batch is one write transaction; the stored bytes
    ///   move to the new key unchanged.
    /// - `atomic_batch_with_meta`: each `write_batch`, `write_batch_with_meta`
    ///   and `update_in_place` call is one write transaction, atomic as a whole.
    /// - `atomic_writes` over any keys: one write transaction.
    /// - `projected_scan`, `count_estimate`: see those methods.
    /// - no `server_clock`: this machine's clock is the only clock there is,
    ///   since one process at a time opens the file; no `schema_hooks`
    ///   (schema-less); no `former_name_reads` (the lazy client reads, then
    ///   writes with a compare-and-set, all in this process anyway).
    fn features(&self) -> Features<'_> {
        Features {
            projected_scan: Some(self),
            ..Features::in_process(self)
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        self.blocking(Inner::kinds).await
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        let kind = kind.to_owned();
        self.blocking(move |inner| inner.scan(&kind, &request, None, None))
            .await
    }

    /// One read transaction over the kind's key range, decoding only each
    /// entity's version unless the filter has conditions.
    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        let kind = kind.to_owned();
        self.blocking(move |inner| inner.count(&kind, Some(&filter)))
            .await
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        let key = key.clone();
        self.blocking(move |inner| inner.get(key)).await
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        self.blocking(move |inner| inner.write_batch(&writes)).await
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        let name = name.to_owned();
        self.blocking(move |inner| inner.meta_get(&name)).await
    }

    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        let name = name.to_owned();
        let (expected, value) = (change.expected, change.value.map(str::to_owned));
        self.blocking(move |inner| {
            let value = value.as_deref();
            inner.meta_cas(&name, MetaChange { expected, value })
        })
        .await
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        let prefix = prefix.to_owned();
        self.blocking(move |inner| inner.meta_list(&prefix)).await
    }
}

#[async_trait]
impl ProjectedScan for EmbeddedStore {
    /// Decodes, of each entity, only the named properties and those the
    /// filter's conditions test (the others are checked, not built).
    async fn scan_projected(
        &self,
        kind: &str,
        request: ScanRequest,
        properties: &[String],
    ) -> Result<ScanPage> {
        let kind = kind.to_owned();
        let mut keep: Vec<String> = properties.to_vec();
        keep.extend(
            request
                .filter
                .conditions
                .iter()
                .filter_map(|c| c.path.first().cloned()),
        );
        keep.sort_unstable();
        keep.dedup();
        self.blocking(move |inner| inner.scan(&kind, &request, Some(&keep), None))
            .await
    }
}

#[async_trait]
impl CountEstimate for EmbeddedStore {
    /// The number of the kind's keys in the file (nothing is decoded).
    async fn estimate_count(&self, kind: &str) -> Result<u64> {
        let kind = kind.to_owned();
        self.blocking(move |inner| inner.count(&kind, None)).await
    }
}

#[async_trait]
impl AtomicBatchWithMeta for EmbeddedStore {
    /// One redb write transaction (one fsync) for the writes and the document.
    async fn write_batch_with_meta(
        &self,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        self.blocking(move |inner| inner.write_batch_with_meta(&writes, &meta))
            .await
    }
}

#[async_trait]
impl AtomicWrites for EmbeddedStore {
    fn scope(&self) -> AtomicScope {
        AtomicScope::AnyKeys
    }

    /// One redb write transaction: guards checked, writes applied, aborted on a conflict.
    async fn write_atomic(
        &self,
        guards: Vec<crate::store::Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        self.blocking(move |inner| inner.write_atomic(&guards, &writes))
            .await
    }
}

#[async_trait]
impl Pushdown for EmbeddedStore {
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.blocking(move |inner| inner.update_in_place(&request, None))
            .await
    }
}

#[async_trait]
impl KindRename for EmbeddedStore {
    /// Each batch is one write transaction: its entities move together.
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        self.blocking(move |inner| inner.rename_kind(&request))
            .await
    }
}

/// Key ranges ([`crate::store::key_range`]): the split reads the kind's keys
/// (no value is decoded), each partition is a bounded range of the file.
#[async_trait]
impl crate::store::Partitions for EmbeddedStore {
    async fn split(&self, kind: &str, count: usize) -> Result<Vec<crate::store::Partition>> {
        let kind = kind.to_owned();
        self.blocking(move |inner| inner.split(&kind, count)).await
    }

    async fn scan_partition(
        &self,
        kind: &str,
        partition: &crate::store::Partition,
        mut request: ScanRequest,
    ) -> Result<ScanPage> {
        let range = crate::store::key_range::parse(kind, partition)?;
        request.cursor = range.start(request.cursor.as_ref());
        let (kind, end) = (kind.to_owned(), range.end());
        self.blocking(move |inner| inner.scan(&kind, &request, None, end.as_deref()))
            .await
    }

    async fn update_partition(
        &self,
        partition: &crate::store::Partition,
        mut request: PushdownRequest,
    ) -> Result<PushdownPage> {
        let range = crate::store::key_range::parse(&request.kind, partition)?;
        request.cursor = range.start(request.cursor.as_ref());
        let end = range.end();
        self.blocking(move |inner| inner.update_in_place(&request, end.as_deref()))
            .await
    }
}

#[cfg(test)]
mod tests;
