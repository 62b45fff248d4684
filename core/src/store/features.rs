//! What a store can do beyond the required core of [`Store`]: its **facets**.
//!
//! A store hands out its optional abilities through one method,
//! [`Store::features`], as a [`Features`] value: one field per facet, each an
//! `Option<&dyn Facet>`. Having the facet *is* the capability: a store that
//! can run version steps in its server returns `pushdown: Some(self)` and
//! implements [`Pushdown`]; one that cannot leaves the field `None` and has no
//! such code. No flag can disagree with the code, and no method answers
//! `Unsupported` by default. Callers ask for the facet and take their other
//! path where it is absent:
//!
//! ```ignore
//! match store.features().pushdown {
//!     Some(pushdown) => pushdown.update_in_place(request).await?,
//!     None => /* run the steps on the client */,
//! }
//! ```
//!
//! Where a facet has a safe fallback, [`StoreExt`](super::StoreExt) offers the
//! call on every store and takes the fallback where the facet is absent:
//! [`StoreExt::now`](super::StoreExt::now) (this machine's clock),
//! [`StoreExt::scan_projected`](super::StoreExt::scan_projected) (whole
//! entities), [`StoreExt::estimate_count`](super::StoreExt::estimate_count)
//! (`None`), [`StoreExt::prepare_schema`](super::StoreExt::prepare_schema) and
//! [`StoreExt::finish_schema`](super::StoreExt::finish_schema) (nothing),
//! [`StoreExt::write_checked_with_meta`](super::StoreExt::write_checked_with_meta)
//! (two calls).
//!
//! A facet may still decline one call it cannot run exactly (a pushdown of a
//! step with conditions, a lazy read of a JSON-string kind): it answers
//! `Unsupported` having written nothing, and the caller takes its other path
//! for that call. That is part of each facet's contract below, not a way of
//! saying the facet is missing.
//!
//! # Scan order: a guarantee, not a facet
//!
//! [`Features::scan_ordered`] is the one plain flag: a promise about what
//! [`Store::scan`] returns (entities in id order, none twice), which no code
//! path can carry. The conformance battery checks the promise on every store
//! that makes it (`scan_pagination`, `scan_filter`).
//!
//! # Each adapter's table
//!
//! Each adapter's `docs.md` has a table of its facets, which a test of the
//! adapter compares with what [`Store::features`] hands out
//! (`tern_testkit::facets`); [`Features::rows`] names the rows.
//!
//! # Adding a facet
//!
//! A trait in this module (or a file of its own under `store/`), a field of
//! [`Features`] (`None` by default, so no store changes), a row in
//! [`Features::rows`], and a row in each adapter's table. The `partitions`
//! facet (partitioned stages and workers, `store/partitions.rs`) goes here as
//! `pub partitions: Option<&'a dyn Partitions>` when it lands.

use async_trait::async_trait;

use super::{
    Advanced, AtomicScope, BatchMetaOutcome, Guard, MetaUpdate, Partitions, PushdownPage,
    PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage, ScanRequest,
    SchemaChange, StepsFrom, Write, WriteOutcome,
};
use crate::model::Key;

#[cfg(doc)]
use super::{Store, StoreExt};

/// The facets of one store, from [`Store::features`]. Fixed for the life of
/// the store (a store decides them from its configuration when it is opened);
/// computing them does no I/O. Every field is `None` (or `false`) by default:
/// a store names only what it has,
/// `Features { pushdown: Some(self), ..Features::default() }`.
#[derive(Clone, Copy, Default)]
pub struct Features<'a> {
    /// A scan returns entities in id order and never returns one twice (a
    /// guarantee about [`Store::scan`], not code: see the module docs).
    pub scan_ordered: bool,
    /// Per-entity version steps run inside the server.
    pub pushdown: Option<&'a dyn Pushdown>,
    /// Several writes with guards, all or nothing (lazy kind renames).
    pub atomic_writes: Option<&'a dyn AtomicWrites>,
    /// Where `atomic_writes` is `None` but a setting of this store would give
    /// it: that setting, said for a user (the refusal of a lazy kind rename
    /// quotes it). `None` wherever `atomic_writes` is `Some`.
    pub atomic_writes_hint: Option<&'static str>,
    /// A batch and its checkpoint in one transaction.
    pub atomic_batch_with_meta: Option<&'a dyn AtomicBatchWithMeta>,
    /// `rename kind a to b` inside the store, batch by batch.
    pub kind_rename: Option<&'a dyn KindRename>,
    /// Schema changes around a stage (a store with a fixed schema).
    pub schema_hooks: Option<&'a dyn SchemaHooks>,
    /// Scans that need only some properties of each entity read less.
    pub projected_scan: Option<&'a dyn ProjectedScan>,
    /// A lazy read that brings a stale entity forward in one step.
    pub former_name_reads: Option<&'a dyn FormerNameReads>,
    /// The server's clock (else this machine's is used).
    pub server_clock: Option<&'a dyn ServerClock>,
    /// A cheap count of a kind's entities for a progress display.
    pub count_estimate: Option<&'a dyn CountEstimate>,
    /// How the store splits a kind for many workers (`tern up --workers`,
    /// `tern worker`); without it every stage runs as one partition.
    pub partitions: Option<&'a dyn Partitions>,
    /// Puts and deletes that a concurrent compare-and-set of the same entity
    /// cannot overwrite, for a store whose plain writes are not ordered
    /// against its compare-and-set (Cassandra: lightweight transactions
    /// against plain writes). The lazy client writes through it to kinds
    /// with a pending migration. A store without it orders its plain writes
    /// already (one server, transactions).
    pub serial_writes: Option<&'a dyn SerialWrites>,
    /// Code in the store's server that migrates entities lazily for every
    /// client (tern's Redis module, docs/module.md), named for messages. Such a
    /// server runs the evolution language only, so the lazy install refuses a
    /// lazy migration with a Rust transform on a store that has one: the server
    /// would refuse every entity below it. Not a facet of the store's code (no
    /// row in the capability tables): a property of the server it talks to,
    /// found when the store is opened.
    pub lazy_in_server: Option<&'static str>,
}

impl std::fmt::Debug for Features<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("Features");
        for (name, has) in self.rows() {
            s.field(name, &has);
        }
        s.finish()
    }
}

impl<'a> Features<'a> {
    /// What every store of this process (the memory store, the embedded
    /// file) has, one transaction or lock away from its data: scans in id
    /// order, pushdown, atomic writes over any keys, a batch with its
    /// checkpoint in one step, kind renames, a count estimate and partitions.
    /// Such a store adds its own on top:
    /// `Features { projected_scan: Some(self), ..Features::in_process(self) }`.
    pub fn in_process<S>(store: &'a S) -> Features<'a>
    where
        S: Pushdown + AtomicWrites + AtomicBatchWithMeta + KindRename + CountEstimate + Partitions,
    {
        Features {
            scan_ordered: true,
            pushdown: Some(store),
            atomic_writes: Some(store),
            atomic_batch_with_meta: Some(store),
            kind_rename: Some(store),
            count_estimate: Some(store),
            partitions: Some(store),
            ..Features::default()
        }
    }

    /// Each facet by name (the field's name) and whether the store has it, in
    /// declaration order; the scope of `atomic_writes` is in
    /// [`Features::atomic_scope`]. What each adapter's capability table lists.
    pub fn rows(&self) -> [(&'static str, bool); 12] {
        [
            ("scan_ordered", self.scan_ordered),
            ("pushdown", self.pushdown.is_some()),
            ("atomic_writes", self.atomic_writes.is_some()),
            (
                "atomic_batch_with_meta",
                self.atomic_batch_with_meta.is_some(),
            ),
            ("kind_rename", self.kind_rename.is_some()),
            ("schema_hooks", self.schema_hooks.is_some()),
            ("projected_scan", self.projected_scan.is_some()),
            ("former_name_reads", self.former_name_reads.is_some()),
            ("server_clock", self.server_clock.is_some()),
            ("count_estimate", self.count_estimate.is_some()),
            ("partitions", self.partitions.is_some()),
            ("serial_writes", self.serial_writes.is_some()),
        ]
    }

    /// Over which keys one [`AtomicWrites::write_atomic`] may go; `None`
    /// without the facet.
    pub fn atomic_scope(&self) -> Option<AtomicScope> {
        self.atomic_writes.map(|a| a.scope())
    }
}

/// Per-entity version steps run inside the server
/// ([`Features::pushdown`]).
#[async_trait]
pub trait Pushdown: Send + Sync {
    /// Runs consecutive per-entity steps inside the server for one batch.
    ///
    /// Unconditional top-level steps always run; a store may decline steps it
    /// cannot run exactly (conditions, nested paths) with `Unsupported`,
    /// writing nothing, and the engine then runs that stage on the client.
    /// The per-entity semantics are those of
    /// [`pushdown`](super::pushdown) (the conformance battery checks it).
    ///
    /// # Errors
    /// `Unsupported` for steps the store cannot run exactly (nothing
    /// written), or the store's errors.
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage>;
}

/// Several writes to several keys, with guards, applied all together or not
/// at all ([`Features::atomic_writes`]): lazy kind renames need it for the
/// keys of one id (the entity under the new name and the stale copy under
/// the old one).
#[async_trait]
pub trait AtomicWrites: Send + Sync {
    /// Over which keys one [`AtomicWrites::write_atomic`] may go: the keys of
    /// one id ([`AtomicScope::OneId`]) or any keys. Fixed for the life of the store.
    fn scope(&self) -> AtomicScope;

    /// Applies `writes` (each with its own condition, as in
    /// [`Store::write_batch`]) all together, in one atomic step, if every guard
    /// holds and every write applies; otherwise writes nothing and answers
    /// [`WriteOutcome::Conflict`]. Used by lazy migration across keys (a kind
    /// rename on access: the entity under the new name and the stale copy
    /// under the old one), only over the keys [`AtomicWrites::scope`] allows.
    /// Callers go through
    /// [`StoreExt::write_atomic_checked`](super::StoreExt::write_atomic_checked).
    ///
    /// `Conflict` means only that a guard or a write's own condition
    /// ([`Write::Insert`], [`Write::Replace`]) did not hold: writes with
    /// neither (puts and deletes alone) are never answered `Conflict`. A store
    /// whose transaction the server aborts for another reason (MongoDB's
    /// `WriteConflict` with a concurrent writer) runs it again itself
    /// ([`TransactionRetry`](super::txn_retry::TransactionRetry)) and answers
    /// an error when it gives up.
    ///
    /// # Errors
    /// The store's errors (nothing is then known to be written or not, as with
    /// any remote call); a temporary [`ErrorKind::Busy`](super::ErrorKind::Busy)
    /// when the store's transaction was aborted on every run (nothing written).
    async fn write_atomic(&self, guards: Vec<Guard>, writes: Vec<Write>) -> Result<WriteOutcome>;
}

/// A batch of writes and a metadata compare-and-set in one transaction
/// ([`Features::atomic_batch_with_meta`]).
///
/// Without it, [`StoreExt::write_checked_with_meta`] makes the two calls one
/// after the other ([`write_then_meta_cas`](super::write_then_meta_cas)), so a
/// conflicting or failing metadata write leaves the entity writes applied.
/// With it, the engine writes each batch and its checkpoint in one
/// transaction: one commit instead of two, and counts that stay exact after a
/// crash.
#[async_trait]
pub trait AtomicBatchWithMeta: Send + Sync {
    /// Applies `writes` as [`Store::write_batch`] does (same outcomes), then
    /// writes the metadata document `meta.name` with the text `meta.value`
    /// computes from their outcomes, if its revision is still `meta.expected`
    /// (a write, never a delete), all in one transaction: on
    /// [`BatchMetaOutcome::Conflict`] (with `writes: None`) or an error nothing
    /// is written, on [`BatchMetaOutcome::Applied`] all of it, together.
    ///
    /// # Errors
    /// The store's errors, or the error of `meta.value`; nothing is written.
    async fn write_batch_with_meta(
        &self,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome>;
}

/// `rename kind a to b` inside the store ([`Features::kind_rename`]).
#[async_trait]
pub trait KindRename: Send + Sync {
    /// Re-keys one batch of the entities of kind `request.from` to kind
    /// `request.to`, keeping ids, values and versions.
    ///
    /// Each entity moves atomically on its own: afterwards it exists under
    /// exactly one of the two keys. An entity whose id `to` already holds is
    /// **not** moved and nothing is overwritten: it is reported in
    /// [`RenameKindPage::collisions`] (the reference semantics,
    /// `tern_core::lang::eval`, refuse a rename onto a kind in use). An entity
    /// that vanished meanwhile is skipped. The cursor passes over moved
    /// entities and collisions alike; a pass (from `cursor: None` until the
    /// cursor is `None`) examines every entity of `from` that exists for the
    /// whole pass, with the same guarantees as a scan. `limit: 0` only checks
    /// the request and writes nothing.
    ///
    /// # Errors
    /// `ConfigInvalid` when the two kinds are configured differently in a way
    /// that a rename of keys cannot carry over (checked before anything is
    /// written), or the store's errors.
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage>;
}

/// Schema changes around a stage, for a store with a fixed schema (Cassandra
/// tables with native columns) ([`Features::schema_hooks`]). Schema-less
/// stores do not have it, and the engine then does nothing.
#[async_trait]
pub trait SchemaHooks: Send + Sync {
    /// Prepares the schema for a stage that makes `changes` (e.g. `ALTER TABLE
    /// ... ADD` for the columns it will write). Called by the engine before
    /// every stage, also when resuming, so it must be idempotent.
    ///
    /// # Errors
    /// The store's errors: the stage does not start.
    async fn prepare_schema(&self, changes: &[SchemaChange]) -> Result<()>;

    /// Called once a migration's census has proved every entity of its kinds
    /// at their target versions, with all the migration's `changes`: a
    /// fixed-schema store may drop what no entity needs any more. Idempotent.
    ///
    /// # Errors
    /// The store's errors; the engine reports a failure as a warning (the
    /// data migration is complete).
    async fn finish_schema(&self, changes: &[SchemaChange]) -> Result<()>;
}

/// Scans that read only some properties of each entity
/// ([`Features::projected_scan`]). Without it,
/// [`StoreExt::scan_projected`] reads whole entities with [`Store::scan`].
#[async_trait]
pub trait ProjectedScan: Send + Sync {
    /// One page of a scan, as [`Store::scan`] (the same filter and cursor,
    /// every entity that passes the filter throughout the pass returned
    /// once), where each entity need hold only its top-level properties
    /// named in `properties`: a store may leave the others out (it may also
    /// keep them). The filter is still evaluated on the whole stored entity.
    ///
    /// One promise is weaker: a page may show entities as they were when
    /// the pass began (a server cursor kept open from page to page), so an
    /// entity changed or deleted since may come back as it was. For passes
    /// that read a few properties of every entity and write nothing back (a
    /// move or copy's index, its safety check, a move's deliveries): an
    /// entity read this way must never be written back or compared in a
    /// replace.
    ///
    /// # Errors
    /// As [`Store::scan`].
    async fn scan_projected(
        &self,
        kind: &str,
        request: ScanRequest,
        properties: &[String],
    ) -> Result<ScanPage>;
}

/// The lazy client's read of a stale entity in one round trip
/// ([`Features::former_name_reads`]).
#[async_trait]
pub trait FormerNameReads: Send + Sync {
    /// Reads one entity in one atomic step after bringing it forward inside
    /// the store.
    ///
    /// - `formers` (the same id under the kind's former names, newest first):
    ///   when `key` holds no entity, the entity of the first of them that
    ///   holds one is renamed to `key` (value, version and TTL as they are).
    ///   The lazy client passes formers only to a store that also has
    ///   [`Features::atomic_writes`] over the keys of one id.
    /// - `steps`: an entity (moved or not) at a version in
    ///   `from..from + steps.len()` then gets the steps from its version on
    ///   (as [`Pushdown::update_in_place`] would) and is written back; any
    ///   other entity is returned as stored.
    ///
    /// [`Advanced::migrated`] tells the caller whether the entity was moved
    /// or stepped (it was stale). Absent under every name: `None`.
    ///
    /// # Errors
    /// `Unsupported` (a move or steps the store cannot run exactly, or a
    /// setting under which it never can), having written nothing: the caller
    /// then reads under each name, migrates on the client and writes with a
    /// compare-and-set.
    async fn get_advanced(
        &self,
        key: &Key,
        formers: &[Key],
        steps: Option<&StepsFrom>,
    ) -> Result<Option<Advanced>>;
}

/// The server's clock ([`Features::server_clock`]). Without it, this
/// machine's clock is the store's ([`StoreExt::now`]).
#[async_trait]
pub trait ServerClock: Send + Sync {
    /// The server's current time in milliseconds since the Unix epoch. Lease
    /// expiry is judged by it, so that machines whose clocks differ agree.
    ///
    /// # Errors
    /// The store's errors.
    async fn now(&self) -> Result<i64>;
}

/// A cheap count of a kind's entities ([`Features::count_estimate`]).
/// Without it, [`StoreExt::estimate_count`] answers `None`.
#[async_trait]
pub trait CountEstimate: Send + Sync {
    /// A cheap estimate of how many entities `kind` holds, for a progress
    /// display: taken from the store's own bookkeeping (a collection's
    /// metadata count, the keys of an embedded file), never by decoding the
    /// entities. Exact on a store nobody writes to, except where the store's
    /// own figure is approximate (MongoDB after an unclean shutdown).
    ///
    /// # Errors
    /// The store's errors.
    async fn estimate_count(&self, kind: &str) -> Result<u64>;
}

/// Puts and deletes ordered against the store's compare-and-set
/// ([`Features::serial_writes`]). Without it,
/// [`StoreExt::write_serial_checked`] runs [`Store::write_batch`].
///
/// On a store with this facet a plain `Put` or `Delete` is not ordered
/// against a concurrent compare-and-set (`Insert`, `Replace`) of the same
/// entity: the compare-and-set may read the entity before the plain write
/// and still overwrite it after the plain write was acknowledged, and the
/// write is lost. Cassandra is such a store: a lightweight transaction's
/// Paxos round writes with its ballot's timestamp, which can be later than
/// the timestamp of a plain write that landed after its read
/// (adapters/cassandra/src/docs.md, "Plain writes and lightweight
/// transactions").
#[async_trait]
pub trait SerialWrites: Send + Sync {
    /// Applies `writes` as [`Store::write_batch`] does (same outcomes: a put
    /// and a delete apply), each `Put` and `Delete` ordered against every
    /// compare-and-set of the same entity, as `Insert` and `Replace` are.
    ///
    /// # Errors
    /// The store's errors; a temporary `Busy` where an entity kept being
    /// created and deleted under the write.
    async fn write_serial(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>>;
}
