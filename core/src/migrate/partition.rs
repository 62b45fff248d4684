//! Partition claims: one worker's fenced lease on one partition of a stage.
//!
//! A partitioned stage's partitions are recorded in the state document
//! ([`StagePartitions`]) when the stage starts. A worker claims a partition
//! that nobody holds (or whose holder's lease expired: a dead worker's) by
//! writing its own lease into the partition's record with a fencing token
//! from [`StateDoc::next_token`]. Every checkpoint of the partition is then
//! conditional on that lease, not on the document's revision: when another
//! writer (another partition's worker, the runner renewing its lease) wrote
//! the document meanwhile, the worker reads it again and, while the
//! partition's lease is still its own, applies its checkpoint again. A worker
//! whose partition was taken over finds another owner there and drops the
//! partition: its last batch's writes, if they landed, are per-entity
//! compare-and-sets that version scoping makes harmless, and on a store that
//! commits a batch with its checkpoint ([`Capability::atomic_batch_with_meta`](crate::store::Capability::atomic_batch_with_meta))
//! they did not land at all.
//!
//! The workers of one process share one cached copy of the document
//! ([`StateCache`]) and commit their checkpoints together: a checkpoint is
//! queued, and whichever worker gets the copy next writes every queued
//! checkpoint (and lease renewal) of the process with one compare-and-set,
//! so that N workers pay one state-document round trip per round of
//! checkpoints rather than N in a row. Each queued change is applied only
//! while its own claim holds its partition; workers of other processes race
//! by compare-and-set.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, Notify, oneshot};
use tokio::task::JoinHandle;

use crate::migration::error::{MigrateError, Result};
use crate::migration::fenced::{self, DocChange, Fence};
use crate::migration::state::{
    self, PartitionLease, PartitionState, RunCounts, StagePartitions, StateDoc, Versioned,
};
use crate::store::{Cursor, Partition, Store, StoreExt, Write, WriteOutcome};

/// The state document as one process last read or wrote it, shared by its
/// partition workers, and their checkpoints waiting for the next write.
pub(crate) type StateCache = Arc<Cache>;

/// See [`StateCache`].
pub(crate) struct Cache {
    /// The document; held by the worker that writes it.
    doc: Mutex<Versioned>,
    /// Changes waiting to be written with the next compare-and-set.
    queue: std::sync::Mutex<Vec<Queued>>,
}

/// One claim's change of its partition's record, queued for the next write.
struct Queued {
    claim: Arc<ClaimShared>,
    change: Box<dyn Fn(&mut PartitionState) + Send + Sync>,
    reply: oneshot::Sender<Result<()>>,
}

/// A new cache, read from the store.
///
/// # Errors
/// A store error.
pub(crate) async fn new_cache(store: &dyn Store) -> Result<StateCache> {
    Ok(Arc::new(Cache {
        doc: Mutex::new(state::load(store).await?),
        queue: std::sync::Mutex::new(Vec::new()),
    }))
}

impl Cache {
    fn take_queue(&self) -> Vec<Queued> {
        std::mem::take(
            &mut *self
                .queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// A copy of `e` for the other workers of a failed group write.
fn copy_error(e: &MigrateError) -> MigrateError {
    match e {
        MigrateError::LeaseLost { token } => MigrateError::LeaseLost { token: *token },
        MigrateError::Store { context, source } => MigrateError::Store {
            context: context.clone(),
            source: crate::store::Error::new(source.kind(), source.to_string()),
        },
        other => MigrateError::Store {
            context: "writing partition checkpoints".to_owned(),
            source: crate::store::Error::new(
                crate::store::ErrorKind::Unexpected,
                other.to_string(),
            ),
        },
    }
}

/// Writes the queued changes `batch` to the document `current` holds, with
/// one compare-and-set (again on the document now there when another process
/// wrote it meanwhile), and answers each change's worker. A change whose
/// claim no longer holds its partition (after reading the store again: the
/// copy at hand may be older) is not applied and its worker is told the
/// partition was lost.
///
/// # Errors
/// A store error (every worker of the batch is told).
async fn commit(store: &dyn Store, current: &mut Versioned, batch: Vec<Queued>) -> Result<()> {
    let mut batch: Vec<Queued> = batch
        .into_iter()
        .filter_map(|q| {
            if q.claim.is_lost() {
                let _ = q.reply.send(Err(q.claim.lose()));
                None
            } else {
                Some(q)
            }
        })
        .collect();
    let mut reloaded_at = None;
    let outcome = loop {
        if batch.iter().any(|q| !q.claim.holds(&current.doc)) {
            if reloaded_at != Some(current.revision) {
                match state::load(store).await {
                    Ok(fresh) => *current = fresh,
                    Err(e) => break Err(e),
                }
                reloaded_at = Some(current.revision);
            }
            let (kept, lost): (Vec<Queued>, Vec<Queued>) =
                batch.into_iter().partition(|q| q.claim.holds(&current.doc));
            for q in lost {
                let _ = q.reply.send(Err(q.claim.lose()));
            }
            batch = kept;
        }
        if batch.is_empty() {
            return Ok(());
        }
        let mut doc = current.doc.clone();
        for q in &batch {
            if let Some(part) = q.claim.mine(&mut doc) {
                (q.change)(part);
            }
        }
        match state::store_or_current(store, current.revision, &doc).await {
            Ok(Ok(rev)) => {
                *current = Versioned {
                    doc,
                    revision: Some(rev),
                };
                break Ok(());
            }
            Ok(Err(now)) => *current = now,
            Err(e) => break Err(e),
        }
    };
    match outcome {
        Ok(()) => {
            for q in batch {
                let _ = q.reply.send(Ok(()));
            }
            Ok(())
        }
        Err(e) => {
            for q in batch {
                let _ = q.reply.send(Err(copy_error(&e)));
            }
            Err(e)
        }
    }
}

/// Who holds a claim, for people: host, process and worker number.
pub(crate) fn holder(worker: usize) -> String {
    format!("{} worker {worker}", super::lease::holder())
}

/// What [`claim_next`] found.
pub(crate) enum Next {
    /// A partition, now held by the caller.
    Claimed(Claim),
    /// Every partition left is held by a live worker: look again later.
    Wait,
    /// Every partition of the stage is done.
    AllDone,
    /// The running migration no longer has this stage partitioned (it moved
    /// on, or the run ended or was abandoned).
    Gone,
}

/// Who claims, and for how long.
#[derive(Debug, Clone)]
pub(crate) struct Claimant {
    /// A random id of the worker.
    pub(crate) owner: String,
    /// For people (`tern status`).
    pub(crate) holder: String,
    /// Lease time without renewal.
    pub(crate) ttl: Duration,
    /// Renew in the background (always, except in tests that pause a worker).
    pub(crate) renew: bool,
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis())
        .unwrap_or(i64::MAX / 4)
        .max(1)
}

/// Where a set of partitions is recorded in the state document: a stage of
/// the running migration, or the sweep of one kind name (`tern sweep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Site {
    /// Stage `stage` of migration `migration` (`running.partitions`).
    Stage {
        /// The running migration.
        migration: u32,
        /// The stage's index in its plan.
        stage: usize,
    },
    /// The sweep of `name` of kind `kind` (`sweep.partitions`).
    Sweep {
        /// The kind swept (its current name).
        kind: String,
        /// The name scanned (the kind or a former name).
        name: String,
    },
}

impl From<(u32, usize)> for Site {
    fn from((migration, stage): (u32, usize)) -> Self {
        Site::Stage { migration, stage }
    }
}

/// The partitions of `stage` of migration `migration` in `doc`, if recorded.
fn stage_parts(doc: &StateDoc, migration: u32, stage: usize) -> Option<&StagePartitions> {
    doc.running
        .as_ref()
        .filter(|r| r.migration == migration)
        .and_then(|r| r.partitions.as_ref())
        .filter(|p| p.stage == stage)
}

/// The partitions recorded at `site` in `doc`, for changing them.
fn site_parts_mut<'d>(doc: &'d mut StateDoc, site: &Site) -> Option<&'d mut StagePartitions> {
    match site {
        Site::Stage { migration, stage } => doc
            .running
            .as_mut()
            .filter(|r| r.migration == *migration)
            .and_then(|r| r.partitions.as_mut())
            .filter(|p| p.stage == *stage),
        Site::Sweep { kind, name } => doc
            .sweep
            .as_mut()
            .filter(|s| &s.kind == kind && &s.name == name)
            .and_then(|s| s.partitions.as_mut()),
    }
}

/// Claims the next partition of `stage` of `migration`: first one nobody has
/// held, then one whose holder's lease expired (taken over from its last
/// checkpoint).
///
/// # Errors
/// A store error.
pub(crate) async fn claim_next(
    store: &Arc<dyn Store>,
    cache: &StateCache,
    site: impl Into<Site>,
    who: &Claimant,
) -> Result<Next> {
    let site = site.into();
    let clock = || async {
        store
            .now()
            .await
            .map_err(MigrateError::store("reading the clock"))
    };
    let mut current = cache.doc.lock().await;
    // Always from the store: expiries are judged on what it holds now. The
    // clock is read in the same round trip (the other workers' checkpoints
    // wait for this lock).
    let (fresh, mut now) = futures::try_join!(state::load(store.as_ref()), clock())?;
    *current = fresh;
    loop {
        let mut doc = current.doc.clone();
        let token = doc.next_token.max(1);
        let Some(parts) = site_parts_mut(&mut doc, &site) else {
            return Ok(Next::Gone);
        };
        if parts.all_done() {
            return Ok(Next::AllDone);
        }
        let free = parts
            .parts
            .iter()
            .position(|p| !p.done && p.lease.is_none())
            .or_else(|| {
                parts
                    .parts
                    .iter()
                    .position(|p| !p.done && p.lease.as_ref().is_some_and(|l| l.expires_at <= now))
            });
        let Some(index) = free else {
            return Ok(Next::Wait);
        };
        let part = &mut parts.parts[index];
        if let Some(dead) = &part.lease {
            tracing::warn!(
                partition = %part.partition.label,
                holder = %dead.holder,
                token = dead.token,
                "taking over a partition whose worker's lease expired; it continues from its last checkpoint"
            );
            part.takeovers += 1;
        }
        part.lease = Some(PartitionLease {
            owner: who.owner.clone(),
            token,
            holder: who.holder.clone(),
            claimed_at: now,
            claimed_processed: part.counts.processed,
            expires_at: now.saturating_add(ttl_ms(who.ttl)),
        });
        let (partition, cursor, counts) =
            (part.partition.clone(), part.cursor.clone(), part.counts);
        doc.next_token = token + 1;
        match state::store_or_current(store.as_ref(), current.revision, &doc).await? {
            Ok(rev) => {
                *current = Versioned {
                    doc,
                    revision: Some(rev),
                };
                drop(current);
                let shared = Arc::new(ClaimShared {
                    store: Arc::clone(store),
                    cache: Arc::clone(cache),
                    site: site.clone(),
                    index,
                    owner: who.owner.clone(),
                    token,
                    ttl_ms: ttl_ms(who.ttl),
                    lost: AtomicBool::new(false),
                    stop: Notify::new(),
                });
                let renewer = who
                    .renew
                    .then(|| tokio::spawn(renew_loop(Arc::clone(&shared))));
                tracing::info!(partition = %partition.label, token, "partition claimed");
                return Ok(Next::Claimed(Claim {
                    shared,
                    renewer,
                    partition,
                    cursor,
                    counts,
                }));
            }
            Err(seen) => {
                *current = seen;
                now = clock().await?;
            }
        }
    }
}

struct ClaimShared {
    store: Arc<dyn Store>,
    cache: StateCache,
    site: Site,
    index: usize,
    owner: String,
    token: u64,
    ttl_ms: i64,
    lost: AtomicBool,
    stop: Notify,
}

impl ClaimShared {
    /// The partition's record in `doc`, while this claim still holds it.
    fn mine<'d>(&self, doc: &'d mut StateDoc) -> Option<&'d mut PartitionState> {
        site_parts_mut(doc, &self.site)
            .and_then(|p| p.parts.get_mut(self.index))
            .filter(|p| {
                !p.done
                    && p.lease
                        .as_ref()
                        .is_some_and(|l| l.owner == self.owner && l.token == self.token)
            })
    }

    /// Changes the partition's record while this claim holds it: queued, and
    /// written with the process's other queued changes (by this worker, or
    /// by the one that holds the cached document now).
    async fn update(
        self: &Arc<Self>,
        change: impl Fn(&mut PartitionState) + Send + Sync + 'static,
    ) -> Result<()> {
        if self.is_lost() {
            return Err(self.lose());
        }
        let (reply, mut answer) = oneshot::channel();
        self.cache
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Queued {
                claim: Arc::clone(self),
                change: Box::new(change),
                reply,
            });
        let mut current = self.cache.doc.lock().await;
        // The worker that held the document before wrote it with its own.
        match answer.try_recv() {
            Ok(done) => return done,
            Err(oneshot::error::TryRecvError::Closed) => return Err(MigrateError::Interrupted),
            Err(oneshot::error::TryRecvError::Empty) => {}
        }
        let batch = self.cache.take_queue();
        commit(self.store.as_ref(), &mut current, batch).await?;
        drop(current);
        answer.await.unwrap_or(Err(MigrateError::Interrupted))
    }
}

/// A claim fences its partition's record. The workers' shared cache may be
/// older than the store: it is read again before a claim counts as lost.
impl Fence for ClaimShared {
    const RELOAD: bool = true;

    fn holds(&self, doc: &StateDoc) -> bool {
        self.mine(&mut doc.clone()).is_some()
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    fn lose(&self) -> MigrateError {
        self.lost.store(true, Ordering::SeqCst);
        MigrateError::LeaseLost { token: self.token }
    }
}

/// A held partition: where its scan continues and what it did so far, as
/// checkpointed. Checkpoints go through it, fenced by its lease. Finish it
/// with [`Claim::finish`]; a claim dropped unfinished stops renewing and its
/// lease expires (another worker then takes the partition over).
pub(crate) struct Claim {
    shared: Arc<ClaimShared>,
    renewer: Option<JoinHandle<()>>,
    /// The range.
    pub(crate) partition: Partition,
    /// Its cursor when claimed.
    pub(crate) cursor: Option<Cursor>,
    /// Its counts when claimed.
    pub(crate) counts: RunCounts,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("partition", &self.partition.label)
            .field("token", &self.shared.token)
            .finish_non_exhaustive()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
    }
}

impl Claim {
    /// The fencing token of the claim.
    pub(crate) fn token(&self) -> u64 {
        self.shared.token
    }

    /// The partition's index in the stage's record.
    pub(crate) fn index(&self) -> usize {
        self.shared.index
    }

    /// Has the partition been taken over (or its lease lost)?
    pub(crate) fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// Checkpoints the partition: its cursor and counts.
    ///
    /// # Errors
    /// [`MigrateError::LeaseLost`] when another worker took the partition over,
    /// or a store error.
    pub(crate) async fn checkpoint(&self, cursor: Option<Cursor>, counts: RunCounts) -> Result<()> {
        self.shared
            .update(move |p: &mut PartitionState| {
                p.cursor = cursor.clone();
                p.counts = counts;
            })
            .await
    }

    /// Applies `writes` and checkpoints the partition with `change` (given the
    /// writes' outcomes). On a store that commits both atomically, in one
    /// transaction, under the process's cache lock; elsewhere the writes
    /// first (workers write in parallel), then the checkpoint.
    ///
    /// # Errors
    /// [`MigrateError::LeaseLost`] when another worker took the partition over
    /// (an atomic store then wrote nothing), or a store error.
    pub(crate) async fn write_and_checkpoint<F>(
        &self,
        writes: Vec<Write>,
        change: F,
    ) -> Result<Vec<WriteOutcome>>
    where
        F: Fn(&mut PartitionState, &[WriteOutcome]) + Send + Sync + 'static,
    {
        let shared = &self.shared;
        if shared.store.features().atomic_batch_with_meta.is_none() {
            let outcomes = shared
                .store
                .write_checked(writes)
                .await
                .map_err(MigrateError::store("writing entities"))?;
            let seen = outcomes.clone();
            shared
                .update(move |p: &mut PartitionState| change(p, &seen))
                .await?;
            return Ok(outcomes);
        }
        let on_doc: DocChange = {
            let owner = Arc::clone(shared);
            Arc::new(move |doc: &mut StateDoc, outcomes: &[WriteOutcome]| {
                if let Some(p) = owner.mine(doc) {
                    change(p, outcomes);
                }
            })
        };
        let mut current = shared.cache.doc.lock().await;
        fenced::write_and_update(
            shared.store.as_ref(),
            &**shared,
            &mut current,
            writes,
            on_doc,
        )
        .await
    }

    /// Marks the partition done with its final counts and gives its lease up.
    ///
    /// # Errors
    /// [`MigrateError::LeaseLost`] when another worker took the partition over,
    /// or a store error.
    pub(crate) async fn finish(mut self, counts: RunCounts) -> Result<()> {
        if let Some(task) = self.renewer.take() {
            self.shared.stop.notify_one();
            let _ = task.await;
        }
        self.shared
            .update(move |p: &mut PartitionState| {
                p.cursor = None;
                p.counts = counts;
                p.done = true;
                p.lease = None;
            })
            .await?;
        tracing::info!(partition = %self.partition.label, "partition done");
        Ok(())
    }
}

async fn renew_loop(shared: Arc<ClaimShared>) {
    loop {
        let wake = (&shared.stop, &shared.lost);
        let Some(now) = super::lease::next_renewal(shared.store.as_ref(), shared.ttl_ms, wake, |e| {
            tracing::warn!(error = %e, "cannot read the clock to renew a partition lease; retrying");
        })
        .await
        else {
            return;
        };
        let expires = now.saturating_add(shared.ttl_ms);
        match shared
            .update(move |p: &mut PartitionState| {
                if let Some(l) = p.lease.as_mut() {
                    l.expires_at = expires;
                }
            })
            .await
        {
            Ok(()) => {}
            Err(MigrateError::LeaseLost { .. }) => {
                tracing::error!(
                    token = shared.token,
                    "partition lease lost: another worker took the partition over"
                );
                return;
            }
            Err(e) => tracing::warn!(error = %e, "partition lease renewal failed; retrying"),
        }
    }
}

/// Records the split of `stage` (its kind `kind`) in the running migration,
/// unless the stage's partitions are recorded already (a resumed run keeps them).
pub(crate) fn record_split(doc: &mut StateDoc, stage: usize, kind: &str, parts: &[Partition]) {
    if let Some(run) = doc.running.as_mut()
        && run.partitions.as_ref().is_none_or(|p| p.stage != stage)
    {
        run.partitions = Some(fresh_split(stage, kind, parts));
    }
}

/// A new record of `parts` of `kind`: none started, none held.
pub(crate) fn fresh_split(stage: usize, kind: &str, parts: &[Partition]) -> StagePartitions {
    StagePartitions {
        stage,
        kind: kind.to_owned(),
        parts: parts
            .iter()
            .map(|p| PartitionState {
                partition: p.clone(),
                cursor: None,
                counts: RunCounts::default(),
                done: false,
                lease: None,
                takeovers: 0,
            })
            .collect(),
    }
}

/// The partitions of `stage` of `migration`, if the document records them.
pub(crate) fn recorded(doc: &StateDoc, migration: u32, stage: usize) -> Option<StagePartitions> {
    stage_parts(doc, migration, stage).cloned()
}
