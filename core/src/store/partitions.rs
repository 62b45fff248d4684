//! Partitions: a store splits a kind into disjoint ranges, each scanned with
//! its own cursor, so that many workers (in one process or on many hosts) can
//! share one stage (`tern up --workers N`, `tern worker`).
//!
//! A split is taken once, when a stage starts, and recorded in the stage's
//! state document: every worker, and every later run that resumes the stage,
//! scans exactly the recorded ranges. Having this facet is the capability; a
//! store without it runs every stage as one partition, as before.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{PushdownPage, PushdownRequest, Result, ScanPage, ScanRequest};

/// One range of a kind's entities, as the store split it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition {
    /// For people (`tern status`, logs): e.g. `tokens -9223372036854775808..-3074457345618258603`,
    /// `slots 0-5460 @ 127.0.0.1:7001`, `_id [a, f)`.
    pub label: String,
    /// The store's own description of the range. Opaque to tern, read only by
    /// the store that wrote it; survives the process (it is kept in the state
    /// document) as a [`super::Cursor`] does.
    pub spec: String,
}

/// A store that splits a kind into partitions.
///
/// The contract: the partitions of one split are disjoint and together cover
/// the kind. An entity's partition is decided by its key alone, so an entity
/// written during the stage (by the application or by tern) is in exactly one
/// partition for the whole stage, whatever the store does meanwhile (a
/// rehash, a compaction); a store whose topology changes under a split (a
/// resharding, a slot migration) answers [`super::ErrorKind::InvalidCursor`]
/// for the partitions it can no longer scan, and the engine rescans them from
/// their start, which version scoping makes safe.
#[async_trait]
pub trait Partitions: Send + Sync {
    /// Splits `kind` into at most `count` partitions (`count` ≥ 1; at least
    /// one partition is returned). A store may return fewer than asked (a
    /// small kind, a topology with fewer natural ranges) but never more.
    /// Workers claim the partitions in the order returned: a store of several
    /// servers lists them so that consecutive partitions are served by
    /// different servers, and workers started together share the load.
    async fn split(&self, kind: &str, count: usize) -> Result<Vec<Partition>>;

    /// One page of the entities of `kind` in `partition` that pass
    /// `request.filter`: the contract of [`super::Store::scan`], restricted
    /// to the partition; `request.cursor` is the partition's own (`None`: its start).
    async fn scan_partition(
        &self,
        kind: &str,
        partition: &Partition,
        request: ScanRequest,
    ) -> Result<ScanPage>;

    /// Runs pushed-down steps over the entities of `partition` only: the
    /// contract of the store's in-place update (`update_in_place`), the
    /// cursor the partition's own. Only called on a store that pushes steps
    /// down; a store that does not answers `Unsupported`.
    async fn update_partition(
        &self,
        partition: &Partition,
        request: PushdownRequest,
    ) -> Result<PushdownPage>;
}
