//! The async store interface that every backend implements.
//!
//! Adapters supply primitives; tern-core owns every algorithm (engine, census,
//! lease, lazy migration) on top of them. A store is chosen once per process
//! and shared as `Arc<dyn Store>`.
//!
//! # The contract
//!
//! **Scans.** [`Store::scan`] returns pages of the entities of one kind that
//! pass a [`Filter`]. A scan started with `cursor: None` and continued with each
//! page's cursor until it is `None`:
//! - returns every entity that exists and passes the filter for the whole scan
//!   at least once;
//! - may return an entity more than once (Redis `SCAN`) unless
//!   [`Features::scan_ordered`] is set; version scoping makes duplicates harmless;
//! - may or may not return entities inserted or changed during the scan (the
//!   engine's census catches them);
//! - returns only entities that pass the filter, evaluated exactly as
//!   [`Filter::matches`] (a store that cannot evaluate it in the server
//!   evaluates it on the client with that function);
//! - may return pages shorter than the limit, even empty ones, before the end.
//!
//! A [`Cursor`] is opaque, serializable text. It survives the process that got
//! it (the engine stores it in its checkpoint) and stays valid while the
//! store's topology does not change; a store that can no longer continue from a
//! cursor answers [`ErrorKind::InvalidCursor`] and the engine restarts the
//! statement's scan from the beginning, which version scoping makes safe.
//!
//! **Writes.** [`Store::write_batch`] applies each [`Write`] atomically on its
//! own (no atomicity across writes) and reports an outcome per write, in order.
//! A [`Write::Replace`] is the compare-and-set of the engine and of lazy
//! migration: it replaces the entity only if the stored one is still the one
//! read. Every store compares the version and the value, so that a writer that
//! does not go through tern (and does not change the version) is detected too.
//! A replace keeps its key; [`StoreExt::write_checked`] (what the engine calls)
//! checks that once for every store ([`check_writes`]).
//!
//! Writes to the same key within one batch apply in order. A write future
//! that is dropped may or may not have taken effect (as with any remote call);
//! the engine's version scoping makes that harmless.
//!
//! **A batch with its checkpoint.** [`StoreExt::write_checked_with_meta`]
//! applies a batch of writes exactly as [`Store::write_batch`] does (same
//! outcomes) and then a compare-and-set of one metadata document whose new
//! text is computed from those outcomes (the engine's checkpoint, fenced by
//! the lease). On most stores it is those two calls one after the other
//! ([`write_then_meta_cas`]). A store with the
//! [`AtomicBatchWithMeta`] facet runs both in one transaction
//! instead: when the metadata revision does not hold, or anything fails,
//! nothing of the call is written; otherwise all of it is, together. The engine
//! relies on that only where the store has the facet (it then writes each batch and
//! its checkpoint in one transaction: one commit instead of two, and counts
//! that stay exact after a crash); elsewhere it keeps writing the batch, then the
//! checkpoint.
//!
//! **Versions** fit in 63 bits (stores may keep them as signed 64-bit numbers).
//!
//! **Metadata.** A small space of named JSON documents (tern's ledger, state,
//! checkpoint and lease) with compare-and-set on a revision number. It lives
//! in the store itself, in a collection, key namespace or table of its own that
//! no kind can name. A read returns JSON equal to what was written (not
//! necessarily the same text). Deleting a missing document with `expected:
//! None` succeeds (`Applied(0)`).
//!
//! # The shape of the trait
//!
//! [`Store`] is the small core every store implements: which store it is,
//! its kinds, reads (`get`, `get_many`), scan pages, batches of writes with
//! compare-and-set, metadata (`meta_get`, `meta_cas`, `meta_list`) and the
//! census (`count`, `version_census`, with defaults that scan). Everything
//! else is an optional **facet** handed out by [`Store::features`]
//! (module [`features`]): having the facet is the capability.

mod atomic;
mod error;
mod ext;
pub mod features;
mod filter;

#[cfg(feature = "embedded")]
pub mod embedded;
mod key_range;
pub mod memory;
pub mod partitions;
pub mod pushdown;
pub mod rename_copy;
pub mod txn_retry;
pub mod url;

use std::collections::BTreeMap;
use std::fmt::Debug;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::model::{Entity, Key, Value, Version};

pub use atomic::{AtomicScope, Guard};
pub use error::{DriverError, Error, ErrorKind, Result};
pub use ext::{StoreExt, scan_pages};
pub use features::{
    AtomicBatchWithMeta, AtomicWrites, CountEstimate, Features, FormerNameReads, KindRename,
    ProjectedScan, Pushdown, SchemaHooks, SerialWrites, ServerClock,
};
pub use filter::{Condition, Filter, VersionFilter, lookup};
pub use partitions::{Partition, Partitions};

/// Which store this is, for messages. Never holds a password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// The URL scheme: `embedded`, `mongodb`, `redis`, `cassandra`, `memory`.
    pub scheme: &'static str,
    /// Where the store is, with any password removed.
    pub location: String,
}

impl std::fmt::Display for StoreInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.location)
    }
}

/// An opaque, serializable scan position. See the module docs for what it survives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cursor(pub String);

/// A request for one page of a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanRequest {
    /// Which entities.
    pub filter: Filter,
    /// Where to continue; `None` starts at the beginning.
    pub cursor: Option<Cursor>,
    /// The most entities to return in this page (a hint for stores like Redis).
    pub limit: usize,
}

impl ScanRequest {
    /// A page of every entity of the kind (no filter): at most `limit`,
    /// from `cursor` (`None`: the beginning).
    pub fn all(cursor: Option<Cursor>, limit: usize) -> ScanRequest {
        ScanRequest {
            filter: Filter::all(),
            cursor,
            limit,
        }
    }
}

/// One page of a scan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanPage {
    /// The entities of this page.
    pub entities: Vec<Entity>,
    /// Where to continue, or `None` when the scan is complete.
    pub cursor: Option<Cursor>,
}

/// One write of a batch. Each is atomic on its own.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Create or replace, unconditionally (\[SE\] `put`).
    Put(Entity),
    /// Create only if no entity has this key.
    Insert(Entity),
    /// Replace `expected` by `new` only if the stored entity is still `expected`
    /// (same version and same value).
    /// `new.key` must equal `expected.key`.
    Replace {
        /// The entity as it was read.
        expected: Entity,
        /// What to write in its place.
        new: Entity,
    },
    /// Delete unconditionally (\[SE\] `delete`). Deleting a missing key succeeds.
    Delete(Key),
}

impl Write {
    /// The key the write is about.
    pub fn key(&self) -> &Key {
        match self {
            Write::Put(e) | Write::Insert(e) => &e.key,
            Write::Replace { expected, .. } => &expected.key,
            Write::Delete(k) => k,
        }
    }
}

/// The outcome of one [`Write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The write took effect.
    Applied,
    /// The condition did not hold (changed meanwhile, or already exists); nothing was written.
    Conflict,
}

/// A named metadata document and its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaEntry {
    /// JSON text.
    pub value: String,
    /// Increases with every write of this name; starts at 1.
    pub revision: u64,
}

/// What a metadata compare-and-set ([`Store::meta_cas`]) asks: write `value`
/// (or with `None`, delete the document) if its revision is still `expected`
/// (`None`: if it does not exist).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaChange<'a> {
    /// The revision the document must still have (`None`: it must not exist).
    pub expected: Option<u64>,
    /// Its new JSON text (`None`: delete it).
    pub value: Option<&'a str>,
}

impl<'a> MetaChange<'a> {
    /// Creates the document with `value`, if it does not exist.
    pub fn create(value: &'a str) -> Self {
        MetaChange {
            expected: None,
            value: Some(value),
        }
    }

    /// Replaces the document with `value`, if its revision is still `expected`.
    pub fn replace(expected: u64, value: &'a str) -> Self {
        MetaChange {
            expected: Some(expected),
            value: Some(value),
        }
    }

    /// Deletes the document, if its revision is still `expected`.
    pub fn delete(expected: u64) -> Self {
        MetaChange {
            expected: Some(expected),
            value: None,
        }
    }
}

/// The outcome of [`Store::meta_cas`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCas {
    /// Written; the new revision (0 after a delete).
    Applied(u64),
    /// The expected revision did not hold; the current entry, if any.
    Conflict(Option<MetaEntry>),
}

/// A metadata compare-and-set whose new text depends on the outcomes of the
/// writes it goes with ([`StoreExt::write_checked_with_meta`]): the engine's
/// checkpoint, whose counts and cursor say what the batch did.
#[derive(Clone)]
pub struct MetaUpdate {
    /// The document's name.
    pub name: String,
    /// The revision it must still have (`None`: it must not exist yet).
    pub expected: Option<u64>,
    /// Its new JSON text, given the outcome of each write of the batch, in order.
    /// Called at most once, after the writes and before the document is
    /// written; an error fails the call (an atomic store then writes nothing).
    pub value: MetaValueFn,
}

/// Computes a metadata document from the outcomes of a batch ([`MetaUpdate::value`]).
pub type MetaValueFn = std::sync::Arc<dyn Fn(&[WriteOutcome]) -> Result<String> + Send + Sync>;

impl Debug for MetaUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaUpdate")
            .field("name", &self.name)
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

/// The outcome of [`StoreExt::write_checked_with_meta`] and
/// [`AtomicBatchWithMeta::write_batch_with_meta`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchMetaOutcome {
    /// The writes were applied (each with the outcome given, as by
    /// [`Store::write_batch`]) and the document written.
    Applied {
        /// One outcome per write, in order.
        writes: Vec<WriteOutcome>,
        /// The document's new revision.
        revision: u64,
    },
    /// The document's revision was not the one expected: it was not written.
    Conflict {
        /// The current entry, if any.
        current: Option<MetaEntry>,
        /// `None` when no write was applied either (always so with
        /// [`AtomicBatchWithMeta`]); otherwise the writes had been
        /// applied first, with these outcomes.
        writes: Option<Vec<WriteOutcome>>,
    },
}

/// [`Store::get_many`] as one [`Store::get`] per key (its default; for an
/// override that has no cheaper path for some calls).
///
/// # Errors
/// The first `get`'s error.
pub async fn get_each<S: Store + ?Sized>(store: &S, keys: &[Key]) -> Result<Vec<Option<Entity>>> {
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        out.push(store.get(key).await?);
    }
    Ok(out)
}

/// A batch and its checkpoint as two calls: [`Store::write_batch`], then
/// [`Store::meta_cas`] with the text computed from its outcomes. Not atomic: a
/// failing compare-and-set leaves the writes applied. What
/// [`StoreExt::write_checked_with_meta`] does on a store without
/// [`AtomicBatchWithMeta`].
///
/// # Errors
/// The store's errors, or the error of `meta.value` (the writes are then applied).
pub async fn write_then_meta_cas<S: Store + ?Sized>(
    store: &S,
    writes: Vec<Write>,
    meta: MetaUpdate,
) -> Result<BatchMetaOutcome> {
    let outcomes = store.write_batch(writes).await?;
    let value = (meta.value)(&outcomes)?;
    Ok(
        match store
            .meta_cas(
                &meta.name,
                MetaChange {
                    expected: meta.expected,
                    value: Some(&value),
                },
            )
            .await?
        {
            MetaCas::Applied(revision) => BatchMetaOutcome::Applied {
                writes: outcomes,
                revision,
            },
            MetaCas::Conflict(current) => BatchMetaOutcome::Conflict {
                current,
                writes: Some(outcomes),
            },
        },
    )
}

/// One per-entity operation of a pushed-down version step.
#[derive(Debug, Clone, PartialEq)]
pub enum PushOp {
    /// Set the property at `path` to `value`.
    Set {
        /// The property path.
        path: Vec<String>,
        /// The value.
        value: Value,
    },
    /// Remove the property at `path`.
    Unset {
        /// The property path.
        path: Vec<String>,
    },
    /// Move the value at `from` to `to` (top-level names). When `from` is absent nothing changes.
    Rename {
        /// The old name.
        from: String,
        /// The new name.
        to: String,
    },
}

/// One version step run inside the server: entities at the step's version that
/// match all `conditions` get `op`; every entity at that version advances by one.
#[derive(Debug, Clone, PartialEq)]
pub struct PushStep {
    /// Only entities matching all these atoms get `op`.
    pub conditions: Vec<Condition>,
    /// The change.
    pub op: PushOp,
}

/// What [`FormerNameReads::get_advanced`] read: the entity as it is stored now, and
/// whether it was moved from a former kind name or stepped.
#[derive(Debug, Clone, PartialEq)]
pub struct Advanced {
    /// The entity after the steps (as stored now).
    pub entity: Entity,
    /// It lay under a former kind name and was moved, or it was at a version
    /// the steps cover and they ran on it.
    pub migrated: bool,
}

/// Consecutive server-side steps of one kind from a version: step `i` applies
/// to entities at `from + i`, as in [`PushdownRequest`]
/// ([`FormerNameReads::get_advanced`], the pending steps of a lazy migration).
#[derive(Debug, Clone, PartialEq)]
pub struct StepsFrom {
    /// The version the first step applies to.
    pub from: Version,
    /// The steps, in order.
    pub steps: Vec<PushStep>,
}

/// A request to run consecutive steps of one kind inside the server, for one
/// batch of entities (those after `cursor`, up to `limit`, in the store's order).
#[derive(Debug, Clone, PartialEq)]
pub struct PushdownRequest {
    /// The kind.
    pub kind: String,
    /// The version the first step applies to; step `i` applies to `from + i`.
    pub from: Version,
    /// The steps, in order.
    pub steps: Vec<PushStep>,
    /// Where the previous batch ended.
    pub cursor: Option<Cursor>,
    /// The batch size: at most this many entities. A store may take fewer per
    /// call (e.g. to bound how long one server-side call blocks the server); the
    /// engine checkpoints each returned page and continues from its cursor.
    pub limit: usize,
}

/// The outcome of one pushed-down batch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushdownPage {
    /// Entities whose version advanced.
    pub advanced: u64,
    /// For each step, entities whose data it changed.
    pub changed: Vec<u64>,
    /// Entities whose data any step changed.
    pub changed_entities: u64,
    /// Where the next batch starts, or `None` when done.
    pub cursor: Option<Cursor>,
}

impl PushdownPage {
    /// Nothing advanced or changed yet, a zero count for each of `steps`
    /// steps, and where the next batch starts.
    pub fn empty(steps: usize, cursor: Option<Cursor>) -> PushdownPage {
        PushdownPage {
            advanced: 0,
            changed: vec![0; steps],
            changed_entities: 0,
            cursor,
        }
    }
}

/// How a stage changes the top-level properties of kinds: what a store with a fixed schema
/// (Cassandra tables with native columns) needs to know to add columns before the stage
/// ([`SchemaHooks::prepare_schema`]) and to drop emptied ones after the census
/// ([`SchemaHooks::finish_schema`]). Schema-less stores ignore it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SchemaChange {
    /// The stage writes entities of `kind` (and so their versions).
    Versioned {
        /// The kind.
        kind: String,
    },
    /// `add kind.name = value`: entities get `name`, holding `value` (for a nested
    /// `add kind.name.x = v`, `value` is the map `{x: v}`).
    Add {
        /// The kind.
        kind: String,
        /// The top-level property.
        name: String,
        /// A value it will hold (the statement's literal).
        value: Value,
    },
    /// `rename kind.from to to`: `to` takes the values of `from`.
    Rename {
        /// The kind.
        kind: String,
        /// The old name.
        from: String,
        /// The new name.
        to: String,
    },
    /// A move or copy: entities of `target` get property `name`, valued like `source.name`.
    Transfer {
        /// The source kind.
        source: String,
        /// The target kind.
        target: String,
        /// The property.
        name: String,
    },
    /// `delete kind.name`, the old name of a rename, the source property of a move: once
    /// every entity of `kind` has passed the step, no entity needs `name` any more (unless
    /// a later step or another writer sets it again).
    Remove {
        /// The kind.
        kind: String,
        /// The top-level property.
        name: String,
    },
}

/// A request to re-key one batch of the entities of kind `from` to kind `to`
/// (`rename kind from to to`): ids, values and versions stay as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenameKindRequest {
    /// The kind renamed.
    pub from: String,
    /// Its new name.
    pub to: String,
    /// Where the previous batch of this pass ended (`None`: from the start).
    pub cursor: Option<Cursor>,
    /// The batch size. `0` only checks that the store can rename `from` to
    /// `to` (support, layouts, names) and renames nothing.
    pub limit: usize,
}

/// The outcome of one batch of [`KindRename::rename_kind`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenameKindPage {
    /// Entities re-keyed from `from` to `to` by this call.
    pub renamed: u64,
    /// Entities of `from` left where they are because `to` already holds an
    /// entity (or, in a key-value store, any key) with the same id. Nothing is overwritten.
    pub collisions: Vec<Key>,
    /// Where the next batch starts, or `None` when the pass is done.
    pub cursor: Option<Cursor>,
}

/// A store of entities: MongoDB, Redis, Cassandra, the embedded store, ...
///
/// The required core; what a store can do beyond it is in its
/// [`features`](Store::features). See the module documentation for the contract.
#[async_trait]
pub trait Store: Send + Sync + Debug + 'static {
    /// Which store this is. No I/O.
    fn info(&self) -> StoreInfo;

    /// The optional facets this store has (see [`features`]); fixed for the
    /// life of `self`. No I/O. Default: none.
    fn features(&self) -> Features<'_> {
        Features::default()
    }

    /// The kinds that hold at least one entity, sorted. Never lists tern's metadata.
    async fn kinds(&self) -> Result<Vec<String>>;

    /// One page of the entities of `kind` that pass `request.filter`.
    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage>;

    /// The entity with this key, or `None`.
    async fn get(&self, key: &Key) -> Result<Option<Entity>>;

    /// The entities with these keys, in order (`None` where absent). The default
    /// calls [`Store::get`] for each key; a store with a cheaper multi-key read
    /// (one pipelined round trip on Redis) overrides it.
    async fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entity>>> {
        get_each(self, keys).await
    }

    /// Applies writes, each atomically on its own; one outcome per write, in order.
    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>>;

    /// The metadata document `name`, if any.
    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>>;

    /// Writes (or with `change.value: None`, deletes) the metadata document `name` if
    /// its revision is still `change.expected` (`None`: if it does not exist).
    ///
    /// A write sets the revision to `expected + 1` (1 for a new document). After a
    /// delete, revisions may start again at 1, so tern never deletes a document
    /// that it fences with compare-and-set (the lease).
    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas>;

    /// The names of metadata documents that start with `prefix`, sorted.
    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Counts the entities of `kind` that pass `filter`. Default: [`count_by_scan`].
    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        count_by_scan(self, kind, filter).await
    }

    /// How many entities of `kind` are at each version: the census.
    async fn version_census(&self, kind: &str) -> Result<BTreeMap<Version, u64>> {
        let mut census = BTreeMap::new();
        ext::for_each_unique(self, kind, Filter::all(), |e| {
            *census.entry(e.version).or_insert(0) += 1;
        })
        .await?;
        Ok(census)
    }
}

/// Counts the entities of `kind` that pass `filter` by scanning them (keys
/// repeated by an unordered scan are counted once): the default of
/// [`Store::count`], for stores that cannot count on the server.
///
/// # Errors
/// The store's scan errors.
pub async fn count_by_scan<S: Store + ?Sized>(
    store: &S,
    kind: &str,
    filter: Filter,
) -> Result<u64> {
    let mut total = 0u64;
    ext::for_each_unique(store, kind, filter, |_| total += 1).await?;
    Ok(total)
}

/// This machine's clock in milliseconds since the Unix epoch: the clock of a
/// store without [`ServerClock`] ([`StoreExt::now`]).
pub fn local_now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Checks a batch against the contract: replace keys agree. Called once for
/// every store, by [`StoreExt::write_checked`] and
/// [`StoreExt::write_checked_with_meta`]; adapters do not repeat it.
///
/// # Errors
/// [`ErrorKind::Unexpected`] naming the write whose keys differ.
pub fn check_writes(writes: &[Write]) -> Result<()> {
    for (i, w) in writes.iter().enumerate() {
        if let Write::Replace { expected, new } = w
            && expected.key != new.key
        {
            return Err(Error::new(
                ErrorKind::Unexpected,
                format!(
                    "write {i}: a replace must keep the key ({} vs {})",
                    expected.key, new.key
                ),
            ));
        }
    }
    Ok(())
}
