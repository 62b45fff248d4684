//! tern's metadata in the store: one fenced state document.
//!
//! Everything tern records lives in one JSON document (name [`STATE_DOC`]) of
//! the store's metadata space: the lease, the ledger of applied migrations,
//! each kind's current version and the checkpoint of a running migration. One
//! document means one compare-and-set fences everything: a runner that lost
//! its lease finds the revision changed and cannot write a stale checkpoint or
//! ledger entry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::{MigrateError, Result};
use crate::store::{Cursor, MetaCas, MetaChange, Store};

/// The name of the state document in the store's metadata space.
pub const STATE_DOC: &str = "state";

/// The format version of [`StateDoc`] this build writes.
pub const STATE_FORMAT: u32 = 1;

/// The lease of the runner that holds the migration lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// A random id of the runner.
    pub owner: String,
    /// The fencing token: larger than every token handed out before.
    pub token: u64,
    /// Host name and process id of the runner, for people.
    pub holder: String,
    /// When it was acquired (ms since the epoch, the store's clock).
    pub acquired_at: i64,
    /// When it expires unless renewed (ms since the epoch, the store's clock).
    pub expires_at: i64,
}

/// Counts of a migration run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    /// Entities read and processed by a step (including version-only advances).
    pub processed: u64,
    /// Entities whose data a step changed.
    pub changed: u64,
    /// Writes that found the entity changed meanwhile and were retried.
    pub conflicts: u64,
    /// Entities skipped because they were already migrated or deleted meanwhile.
    pub skipped: u64,
    /// Sources of a `move` that matched no target and kept their property.
    pub unmatched_sources: u64,
    /// Entities found below their target by a census and swept.
    pub swept: u64,
}

impl RunCounts {
    /// Adds `other` to `self`.
    pub fn add(&mut self, other: &RunCounts) {
        self.processed += other.processed;
        self.changed += other.changed;
        self.conflicts += other.conflicts;
        self.skipped += other.skipped;
        self.unmatched_sources += other.unmatched_sources;
        self.swept += other.swept;
    }
}

/// One applied migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The migration number.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// `sha256:<hex>` of its normalized text.
    pub checksum: String,
    /// When it was marked applied (ms since the epoch).
    pub applied_at: i64,
    /// Wall time of the run that completed it, in ms (the last run, if resumed).
    pub duration_ms: u64,
    /// What the runs did.
    pub counts: RunCounts,
    /// The canonical text of the script (empty for a migration written in Rust),
    /// kept so that a reader of the store alone knows every step of every kind.
    pub script: String,
    /// The version steps it added, as `(kind, version after the step)`.
    pub steps: Vec<(String, u64)>,
}

/// The checkpoint of a running migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    /// The migration number.
    pub migration: u32,
    /// Its checksum when the run started: a resumed run refuses an edited file.
    pub checksum: String,
    /// When the first run of it started (ms since the epoch).
    pub started_at: i64,
    /// The stage being run (index into the migration's plan).
    pub stage: usize,
    /// The phase of the stage (a move has a target phase and a source phase).
    pub phase: u32,
    /// Where the stage's scan continues.
    pub cursor: Option<Cursor>,
    /// Counts so far.
    pub counts: RunCounts,
    /// Number of checkpoints written.
    pub checkpoints: u64,
    /// The partitions of the stage being run, when it runs partitioned
    /// (`tern up --workers N`, `tern worker`): recorded when the stage
    /// starts, each with its own cursor, counts and lease. While it is set,
    /// `cursor` is unused and `counts` holds the counts before the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<StagePartitions>,
}

/// The partitions of one stage, as split when it started. Every worker and
/// every resumed run scans exactly these ranges; the stage is done when each is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagePartitions {
    /// The stage (index into the migration's plan).
    pub stage: usize,
    /// The kind the stage scans.
    pub kind: String,
    /// The partitions, in the store's order.
    pub parts: Vec<PartitionState>,
}

impl StagePartitions {
    /// Has every partition finished?
    pub fn all_done(&self) -> bool {
        self.parts.iter().all(|p| p.done)
    }

    /// The counts of all partitions together.
    pub fn counts(&self) -> RunCounts {
        let mut total = RunCounts::default();
        for p in &self.parts {
            total.add(&p.counts);
        }
        total
    }
}

/// One partition of a stage: its range, its checkpoint and who runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// The range, as the store split it.
    pub partition: crate::store::Partition,
    /// Where the partition's scan continues (`None`: its start, or done).
    pub cursor: Option<Cursor>,
    /// What its batches did so far.
    pub counts: RunCounts,
    /// It has been scanned to its end.
    pub done: bool,
    /// The worker that holds it, if any (a dead worker's lease stays until it expires).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<PartitionLease>,
    /// How often it was taken over from a worker whose lease had expired.
    #[serde(default)]
    pub takeovers: u32,
}

/// The lease of the worker running one partition: fenced like the runner's
/// lease ([`LeaseRecord`]), by a token from [`StateDoc::next_token`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLease {
    /// A random id of the worker.
    pub owner: String,
    /// The fencing token: every checkpoint of the partition is conditional on it.
    pub token: u64,
    /// Host name, process id and worker number, for people.
    pub holder: String,
    /// When it claimed the partition (ms since the epoch, the store's clock).
    pub claimed_at: i64,
    /// The partition's processed count when it claimed it (for its rate).
    pub claimed_processed: u64,
    /// When the lease expires unless renewed (ms since the epoch, the store's clock).
    pub expires_at: i64,
}

/// One kind rename (`rename kind from to to`): the prefix history.
///
/// Recorded when the rename's first batch is about to run (before any entity
/// moves) and kept for good, so that a reader that does not find an entity
/// under the new kind can look under the old one, in order
/// ([`StateDoc::former_kinds`]). The rename is complete once its migration is
/// in [`StateDoc::applied`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRename {
    /// The migration that renames the kind.
    pub migration: u32,
    /// The old kind (key prefix, collection, table).
    pub from: String,
    /// The new kind.
    pub to: String,
    /// When its first batch started (ms since the epoch, the store's clock).
    pub started_at: i64,
}

/// The whole state document.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StateDoc {
    /// The format version.
    pub format: u32,
    /// The next fencing token to hand out.
    pub next_token: u64,
    /// The current lease, if any runner holds (or held and did not release) it.
    pub lease: Option<LeaseRecord>,
    /// The current version of each kind: the steps of all applied migrations.
    pub kinds: BTreeMap<String, u64>,
    /// Applied migrations, in order.
    pub applied: Vec<LedgerEntry>,
    /// The checkpoint of a migration that is running or was interrupted.
    pub running: Option<RunState>,
    /// Every kind rename started, oldest first (absent from documents written
    /// before kind renames existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renames: Vec<KindRename>,
    /// Every lazy migration installed, oldest first (see `tern_core::lazy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lazy: Vec<LazyRecord>,
    /// The checkpoint of a running or interrupted `tern sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepState>,
}

/// An installed lazy migration: its steps are in the ledger (its canonical
/// text), its entities migrate on access until a sweep completes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LazyRecord {
    /// The migration.
    pub migration: u32,
    /// When it was installed (ms since the epoch, the store's clock).
    pub installed_at: i64,
    /// The kinds it steps or renames to, by their name after it, with their version after it.
    pub kinds: BTreeMap<String, u64>,
    /// When a sweep's census found no entity below it, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<i64>,
    /// When its spec was retired (`tern gc`), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<i64>,
}

/// Where a sweep stopped: the kind, the name it scans (the kind or a former name) and the cursor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepState {
    /// The kind being swept (its current name).
    pub kind: String,
    /// The name whose entities are scanned: the kind, or one of its former names.
    pub name: String,
    /// Where the scan continues.
    pub cursor: Option<Cursor>,
    /// Entities migrated so far by this sweep (while `partitions` is set:
    /// before the name was split; each partition counts its own).
    pub migrated: u64,
    /// The name's partitions, when the sweep runs partitioned (`tern sweep
    /// --workers N`): split when the name's sweep started, each with its own
    /// checkpoint and fenced lease; `cursor` is unused meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<StagePartitions>,
    /// How many entities of the kind the census found stale when this
    /// sweep of the kind started, before an interruption: the sweep reports
    /// this less what the census finds stale at its end, so that a resumed
    /// sweep counts every entity once, whatever the kill lost between a
    /// write and its checkpoint, and an entity re-keyed from a former name
    /// then advanced counts once. `None` in a checkpoint of an older tern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_at_start: Option<u64>,
    /// The fencing token of the lease of the sweep that wrote this
    /// checkpoint. A `tern worker` joins the sweep's splits only while the
    /// document's lease is this one and unexpired: never a split a killed
    /// sweep left (the next `tern sweep` resumes it and records its own
    /// token), never under another runner (`tern up`). `None` in a
    /// checkpoint of an older tern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_token: Option<u64>,
    /// While `partitions` is set: whether its partitions run inside the
    /// store (the first pass's server-side steps) rather than the client
    /// path, so that a joining worker sweeps them the same way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_store: bool,
}

impl StateDoc {
    /// The names `kind` had before, newest first: where a reader that does not
    /// find an entity under `kind` looks next (KVolve's fallback from the new
    /// prefix to the old). A name reused after it was renamed away does not
    /// inherit the history of its earlier holder.
    pub fn former_kinds(&self, kind: &str) -> Vec<String> {
        let mut current = kind;
        let mut out = Vec::new();
        for r in self.renames.iter().rev() {
            if r.to == current {
                out.push(r.from.clone());
                current = &r.from;
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rename(migration: u32, from: &str, to: &str) -> KindRename {
        KindRename {
            migration,
            from: from.to_owned(),
            to: to.to_owned(),
            started_at: 0,
        }
    }

    #[test]
    fn former_kinds_follow_the_chain_newest_first() {
        let doc = StateDoc {
            renames: vec![
                rename(1, "a", "b"),
                rename(2, "b", "c"),
                rename(3, "x", "b"),
            ],
            ..StateDoc::default()
        };
        assert_eq!(doc.former_kinds("c"), vec!["b".to_owned(), "a".to_owned()]);
        // `b` was reused by the rename of `x`: it does not inherit `a`.
        assert_eq!(doc.former_kinds("b"), vec!["x".to_owned()]);
        assert!(doc.former_kinds("a").is_empty());
    }

    #[test]
    fn documents_without_renames_read_and_write_as_before() {
        let doc: StateDoc = serde_json::from_str(
            r#"{"format":1,"next_token":1,"lease":null,"kinds":{},"applied":[],"running":null}"#,
        )
        .unwrap();
        assert!(doc.renames.is_empty());
        assert!(!serde_json::to_string(&doc).unwrap().contains("renames"));
    }
}

/// The state document and the revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The document.
    pub doc: StateDoc,
    /// Its revision in the store (`None`: it does not exist yet).
    pub revision: Option<u64>,
}

/// Reads the state document (an empty one if the store has none).
///
/// # Errors
/// A store error, or a document that is not tern's state.
pub async fn load(store: &dyn Store) -> Result<Versioned> {
    let entry = store
        .meta_get(STATE_DOC)
        .await
        .map_err(MigrateError::store("reading tern's state"))?;
    current(entry.as_ref())
}

/// The state document in a metadata entry.
///
/// # Errors
/// A document that is not tern's state, or written by a newer tern.
pub fn parse(entry: &crate::store::MetaEntry) -> Result<Versioned> {
    let doc: StateDoc =
        serde_json::from_str(&entry.value).map_err(|e| MigrateError::CorruptMetadata {
            name: STATE_DOC.to_owned(),
            message: e.to_string(),
        })?;
    if doc.format > STATE_FORMAT {
        return Err(MigrateError::CorruptMetadata {
            name: STATE_DOC.to_owned(),
            message: format!(
                "written by a newer tern (format {}, this build reads up to {STATE_FORMAT}); upgrade tern",
                doc.format
            ),
        });
    }
    Ok(Versioned {
        doc,
        revision: Some(entry.revision),
    })
}

/// The state document as a conflicting compare-and-set found it (`None`: deleted).
///
/// # Errors
/// As [`parse`].
pub fn current(entry: Option<&crate::store::MetaEntry>) -> Result<Versioned> {
    match entry {
        Some(e) => parse(e),
        None => Ok(Versioned {
            doc: StateDoc {
                format: STATE_FORMAT,
                next_token: 1,
                ..StateDoc::default()
            },
            revision: None,
        }),
    }
}

/// Writes `doc` if the document is still at `expected`: `Ok(Ok(new revision))`,
/// or `Ok(Err(the document as it is now))` when someone wrote it meanwhile.
///
/// # Errors
/// A store error, or a current document that is not tern's state.
pub async fn store_or_current(
    store: &dyn Store,
    expected: Option<u64>,
    doc: &StateDoc,
) -> Result<std::result::Result<u64, Versioned>> {
    match cas(store, expected, doc).await? {
        MetaCas::Applied(rev) => Ok(Ok(rev)),
        MetaCas::Conflict(now) => Ok(Err(current(now.as_ref())?)),
    }
}

/// The compare-and-set under [`store_or_current`] and [`store_if`]: writes
/// `doc` if the document is still at `expected`, and hands back the store's answer.
async fn cas(store: &dyn Store, expected: Option<u64>, doc: &StateDoc) -> Result<MetaCas> {
    let text = serde_json::to_string(doc).map_err(|e| MigrateError::CorruptMetadata {
        name: STATE_DOC.to_owned(),
        message: e.to_string(),
    })?;
    store
        .meta_cas(
            STATE_DOC,
            MetaChange {
                expected,
                value: Some(&text),
            },
        )
        .await
        .map_err(MigrateError::store("writing tern's state"))
}

/// `doc` as the JSON text stored, for a store call that writes it
/// ([`crate::store::MetaUpdate::value`]).
///
/// # Errors
/// `Unexpected` if it cannot be serialized (it always can).
pub(crate) fn to_json(doc: &StateDoc) -> crate::store::Result<String> {
    serde_json::to_string(doc).map_err(|e| {
        crate::store::Error::new(
            crate::store::ErrorKind::Unexpected,
            format!("cannot serialize tern's {STATE_DOC:?} document"),
        )
        .with_source(e)
    })
}

/// Writes `doc` if the document is still at `expected`. `Ok(Some(new revision))`
/// on success, `Ok(None)` when someone else wrote it meanwhile.
///
/// # Errors
/// A store error.
pub async fn store_if(
    store: &dyn Store,
    expected: Option<u64>,
    doc: &StateDoc,
) -> Result<Option<u64>> {
    match cas(store, expected, doc).await? {
        MetaCas::Applied(rev) => Ok(Some(rev)),
        MetaCas::Conflict(_) => Ok(None),
    }
}
