//! Running stages: checkpointed, version-scoped batches.
//!
//! Every stage reads a batch of entities still at the version its first step
//! expects, computes their new state, and writes each back with a
//! compare-and-set on the entity as read. A conflict (the entity changed
//! meanwhile) re-reads it: if it is still at the expected version it is
//! recomputed and written again, otherwise it is left alone. After every
//! batch a checkpoint (cursor and counts) is written under the lease; on a
//! store that can ([`AtomicBatchWithMeta`](crate::store::AtomicBatchWithMeta)), in the same transaction
//! as the batch's writes.
//!
//! Correctness rests on version scoping, not on the cursor: an entity that a
//! crashed run already wrote is at its new version and no longer matches, so
//! replaying a batch is harmless.

use std::collections::BTreeMap;

use tracing::Instrument;

use super::join::{self, JoinIndex, SpillMap, Values};
use super::options::RunOptions;
use super::partition::Claim;
use crate::lang::eval::{self, TargetResolution};
use crate::lang::{Statement, Transfer};
use crate::migration::apply::{apply_per_entity, atom_condition, pushdown_steps};
use crate::migration::error::{MigrateError, Result};
use crate::migration::lease::Lease;
use crate::migration::plan::{Stage, Step, StepOp};
use crate::migration::progress::{CancelFlag, Progress, fault_point};
#[cfg(feature = "fault-injection")]
use crate::migration::progress::{FaultAt, FaultHook, FaultPoint};
use crate::migration::state::{RunCounts, StateDoc};
use crate::model::{Entity, Key, Value, Version};
use crate::store::{
    Condition, Cursor, ErrorKind, Filter, PushStep, Pushdown, PushdownPage, PushdownRequest,
    ScanPage, ScanRequest, Store, StoreExt, VersionFilter, Write, WriteOutcome,
};

/// The position of a stage run: phase, cursor and counts, as checkpointed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Position {
    pub(crate) phase: u32,
    pub(crate) cursor: Option<Cursor>,
    pub(crate) counts: RunCounts,
    /// `counts.processed` when this run of the stage began (for progress, not checkpointed).
    pub(crate) stage_base: u64,
}

/// Which batch of which stage is being written (for fault points and retries).
#[derive(Debug, Clone, Copy)]
struct BatchAt {
    index: usize,
    phase: u32,
    batch_no: u64,
    /// The version the stage reads entities at.
    from: Version,
}

/// A batch's checkpoint, for a store that commits it with the batch's writes
/// ([`AtomicBatchWithMeta`](crate::store::AtomicBatchWithMeta)).
#[derive(Debug, Clone)]
struct BatchCheckpoint {
    stage: usize,
    phase: u32,
    /// The counts before the batch.
    base: RunCounts,
    /// The cursor the batch was read from.
    from: Option<Cursor>,
    /// Where the next batch starts.
    next: Option<Cursor>,
}

/// A batch whose writes are done and whose checkpoint is not written yet.
///
/// On a store that does not commit a checkpoint with the batch's writes, a
/// batch's checkpoint is written while the next batch is (its writes, and the
/// read of the page after it), so that a worker's chain per batch is the
/// slower of the two round trips, not their sum. It stays sound: a
/// checkpoint is taken only after its batch's writes all returned, so it
/// never claims a batch not yet written; one checkpoint at a time, in batch
/// order (the next one starts only once this one is written), so the record
/// never goes back. A crash may leave two batches written past the recorded
/// checkpoint instead of one: their entities are already at their new
/// version, and a resumed scan no longer finds them (version scoping). A
/// store that commits a batch's checkpoint with its writes does not defer.
#[derive(Debug)]
struct Behind {
    batch_no: u64,
    pos: Position,
}

/// What [`Runner::write_batch`] did about the batch's checkpoint.
#[derive(Debug, Clone, Copy, Default)]
struct Written {
    /// The checkpoint past the batch was committed with its last writes.
    checkpointed: bool,
    /// The fault point before the checkpoint (`FaultAt::BeforeCheckpoint`) was passed.
    before_checkpoint: bool,
}

/// One attempt at a batch: where it is, how its entities are computed, and
/// the checkpoint its writes commit with (if the store commits one atomically).
#[derive(Clone, Copy)]
struct AttemptAt<'r, 'c> {
    at: &'r BatchAt,
    compute: &'r Compute<'c>,
    checkpoint: Option<&'r BatchCheckpoint>,
    /// The first attempt (later ones retry the entities that met a conflict).
    first: bool,
}

/// Counts what writes did: an applied write is processed (and changed the data
/// if its `changed` flag says so), a conflicting one a conflict. The one place
/// outcomes are counted, for the run's counts and for the checkpoint committed
/// with the writes alike.
fn count_outcomes(counts: &mut RunCounts, outcomes: &[WriteOutcome], changed: &[bool]) {
    for (outcome, changed) in outcomes.iter().zip(changed) {
        match outcome {
            WriteOutcome::Applied => {
                counts.processed += 1;
                counts.changed += u64::from(*changed);
            }
            WriteOutcome::Conflict => counts.conflicts += 1,
        }
    }
}

/// Everything a stage run needs.
pub(crate) struct Runner<'a> {
    pub(crate) store: &'a dyn Store,
    /// The migration being run.
    pub(crate) migration: u32,
    /// Its name, for messages.
    pub(crate) migration_name: &'a str,
    /// The runner's lease (`None` in a worker that holds only partitions).
    pub(crate) lease: Option<&'a Lease>,
    /// The partition this runner runs, in a partitioned stage: its scan is
    /// the partition's and its checkpoints go to the partition's record,
    /// fenced by the partition's lease instead of `lease`.
    pub(crate) part: Option<&'a Claim>,
    pub(crate) options: &'a RunOptions,
    pub(crate) progress: &'a dyn Progress,
    pub(crate) cancel: &'a CancelFlag,
    #[cfg(feature = "fault-injection")]
    pub(crate) faults: Option<&'a FaultHook>,
    /// Every step of every kind (applied migrations and the running one).
    pub(crate) history: &'a BTreeMap<String, Vec<Step>>,
    /// Conflicts found by an unsafe move/copy (filled when `collect_conflicts`
    /// or `options.force_unsafe`: the report lists what was overridden).
    pub(crate) conflicts: std::sync::Mutex<Vec<crate::migration::conflict::Conflict>>,
    /// Collect unsafe conflicts instead of failing (dry runs).
    pub(crate) collect_conflicts: bool,
    /// `--max-rate`, as a token bucket (none without a limit).
    pub(crate) pace: Option<crate::migration::pace::RateLimiter>,
    /// Move sources of the current batch that matched no target.
    pub(crate) unmatched: std::sync::atomic::AtomicU64,
    /// The index of the first stage's move or copy, built and checked before the run.
    pub(crate) prebuilt: std::sync::Mutex<Option<JoinIndex>>,
    /// This run's prechecks found the new name of the first stage's kind
    /// rename empty (so the stage, starting right after, need not count it again).
    pub(crate) renames_prechecked: bool,
    /// The kind rename (`from`, `to`) whose stage census last proved, in this
    /// run, that no entity is left under `from`.
    pub(crate) rename_proven: std::sync::Mutex<Option<(String, String)>>,
}

/// The span of writing batch `batch_no` of a stage. `worker` names the
/// partition once runs are split among workers; empty until then.
fn batch_span(batch_no: u64) -> tracing::Span {
    tracing::info_span!("batch", batch = batch_no, worker = tracing::field::Empty)
}

fn store_err(context: &str) -> impl FnOnce(crate::store::Error) -> MigrateError + '_ {
    move |source| MigrateError::Store {
        context: context.to_owned(),
        source,
    }
}

impl Runner<'_> {
    /// The fault point `at` of batch `batch` of `phase` of `stage` of this run.
    #[cfg(feature = "fault-injection")]
    pub(crate) fn point(&self, stage: usize, phase: u32, batch: u64, at: FaultAt) -> FaultPoint {
        FaultPoint {
            migration: self.migration,
            stage,
            phase,
            batch,
            at,
        }
    }

    /// Stops the run here when a test's fault hook asks for a crash at `point`
    /// (feature `fault-injection`; the macro `fault_point!` calls it).
    #[cfg(feature = "fault-injection")]
    pub(crate) fn fault(&self, point: FaultPoint) -> Result<()> {
        if let Some(hook) = self.faults
            && hook(point)
        {
            return Err(MigrateError::InjectedCrash(format!("{point:?}")));
        }
        Ok(())
    }

    /// The runner's lease, for the checkpoints of an unpartitioned stage.
    ///
    /// # Errors
    /// [`MigrateError::Dirty`] in a worker that holds only partitions (it
    /// runs no such stage).
    pub(crate) fn held(&self) -> Result<&Lease> {
        self.lease.ok_or_else(|| {
            MigrateError::Dirty(
                "a partition worker was asked to checkpoint a whole stage; only the runner that holds the lease does"
                    .to_owned(),
            )
        })
    }

    pub(crate) fn check_continue(&self) -> Result<()> {
        if let Some(part) = self.part
            && part.is_lost()
        {
            return Err(MigrateError::LeaseLost {
                token: part.token(),
            });
        }
        if let Some(lease) = self.lease
            && lease.is_lost()
        {
            return Err(MigrateError::LeaseLost {
                token: lease.token(),
            });
        }
        if self.cancel.is_cancelled() {
            return Err(MigrateError::Interrupted);
        }
        Ok(())
    }

    /// Waits for the tokens of `processed` entities (`--max-rate`); a cancel
    /// ends the wait.
    pub(crate) async fn throttle(&self, processed: u64) {
        crate::migration::pace::pace(self.pace.as_ref(), processed, self.cancel).await;
    }

    /// Writes the checkpoint of `stage` under the lease.
    pub(crate) async fn checkpoint(&self, stage: usize, pos: &Position) -> Result<()> {
        if let Some(part) = self.part {
            return part.checkpoint(pos.cursor.clone(), pos.counts).await;
        }
        self.checkpoint_and(stage, pos, |_| ()).await
    }

    /// Writes the checkpoint of `stage` under the lease, and makes `also` in
    /// the same update of the state document.
    pub(crate) async fn checkpoint_and(
        &self,
        stage: usize,
        pos: &Position,
        mut also: impl FnMut(&mut StateDoc),
    ) -> Result<()> {
        let (phase, cursor, counts) = (pos.phase, pos.cursor.clone(), pos.counts);
        self.held()?
            .update(move |doc| {
                if let Some(run) = doc.running.as_mut() {
                    run.stage = stage;
                    run.phase = phase;
                    run.cursor = cursor.clone();
                    run.counts = counts;
                    run.checkpoints += 1;
                }
                also(doc);
            })
            .await
    }

    /// After the checkpoint of batch `batch_no` of `stage` (in `phase`): the
    /// crash point there, then the progress report.
    fn after_checkpoint(
        &self,
        stage: usize,
        phase: u32,
        batch_no: u64,
        pos: &Position,
    ) -> Result<()> {
        fault_point!(self, stage, phase, batch_no, AfterCheckpoint);
        self.report_checkpoint(pos);
        if !self.collect_conflicts {
            crate::telemetry::checkpoint(
                self.migration,
                pos.counts.processed.saturating_sub(pos.stage_base),
                &pos.counts,
            );
        }
        Ok(())
    }

    /// Reports a checkpoint at `pos` to the progress observer.
    pub(crate) fn report_checkpoint(&self, pos: &Position) {
        self.progress.checkpoint(
            pos.counts.processed.saturating_sub(pos.stage_base),
            &pos.counts,
        );
    }

    /// Runs one stage from `pos` to its end. `pos.counts` accumulates.
    pub(crate) async fn run_stage(
        &self,
        index: usize,
        stage: &Stage,
        pos: &mut Position,
    ) -> Result<()> {
        match stage {
            Stage::Local { kind, from, steps } => {
                if self.options.pushdown
                    && let Some(facet) = self.store.features().pushdown
                    && let Some(push) = pushdown_steps(steps)
                    && self
                        .run_pushdown(facet, index, kind, *from, push, pos)
                        .await?
                {
                    return Ok(());
                }
                // The store cannot run these steps exactly: the client path does.
                self.run_local(index, kind, *from, steps, pos).await
            }
            Stage::Transfer {
                transfer,
                is_move,
                target_from,
                source_version,
                text,
            } => {
                if pos.phase == 0 {
                    let join = self.transfer_index(transfer, text).await?;
                    self.run_transfer_targets(index, transfer, *target_from, text, &join, pos)
                        .await?;
                    pos.phase = 1;
                    pos.cursor = None;
                    if *is_move {
                        self.checkpoint(index, pos).await?;
                    }
                }
                if *is_move && pos.phase == 1 {
                    let delivered =
                        join::deliveries(self.reading(), transfer, self.options.join_memory)
                            .await?;
                    self.run_move_sources(index, transfer, *source_version, &delivered, pos)
                        .await?;
                }
                Ok(())
            }
            Stage::RenameKind { from, to } => self.run_rename_kind(index, from, to, pos).await,
            Stage::Build { build, text, .. } => self.run_build(index, build, text, pos).await,
        }
    }

    /// The page of a stage's scan of `kind` at exactly `from` after `cursor`.
    async fn stage_page(
        &self,
        kind: &str,
        from: Version,
        cursor: Option<Cursor>,
    ) -> crate::store::Result<ScanPage> {
        let request = ScanRequest {
            filter: Filter::at_version(from),
            cursor,
            limit: self.options.batch_size,
        };
        let read = async {
            match (self.part, self.store.features().partitions) {
                (Some(part), Some(facet)) => {
                    facet.scan_partition(kind, &part.partition, request).await
                }
                _ => self.store.scan(kind, request).await,
            }
        };
        // Each phase of a batch is a span (`page`, `batch` for the writes,
        // `checkpoint`), so that a subscriber timing spans shows where a
        // batch's time goes.
        read.instrument(tracing::debug_span!("page")).await
    }

    /// One batch of a pushed-down stage: of the whole kind, or of this runner's partition.
    async fn pushdown_page(
        &self,
        pushdown: &dyn Pushdown,
        request: PushdownRequest,
    ) -> crate::store::Result<PushdownPage> {
        match (self.part, self.store.features().partitions) {
            (Some(part), Some(facet)) => facet.update_partition(&part.partition, request).await,
            _ => pushdown.update_in_place(request).await,
        }
    }

    /// Scans `kind` at exactly `from` in batches; `compute` turns each read
    /// entity into its new state (or `None` to leave it). Conflicts are re-read
    /// and recomputed while the entity is still at `from`.
    async fn batched(
        &self,
        index: usize,
        kind: &str,
        from: Version,
        pos: &mut Position,
        compute: Compute<'_>,
    ) -> Result<()> {
        let mut batch_no = 0u64;
        // The next page, read while the current batch was written.
        let mut ahead: Option<(Cursor, ScanPage)> = None;
        // The last batch's checkpoint, not written yet.
        let mut behind: Option<Behind> = None;
        loop {
            if let Err(e) = self.check_continue() {
                // A cancelled run still records how far it got; if that fails,
                // the resume starts one batch earlier (those entities are
                // already migrated and are skipped), so the cancel is reported.
                if let Err(ckpt) = self.catch_up(index, behind.take()).await {
                    tracing::warn!(stage = index, error = %ckpt, "last checkpoint not written");
                }
                return Err(e);
            }
            let page = match ahead.take() {
                Some((at, page)) if pos.cursor.as_ref() == Some(&at) => Ok(page),
                _ => self.stage_page(kind, from, pos.cursor.clone()).await,
            };
            let page = match page {
                Ok(p) => p,
                Err(e) if e.kind() == ErrorKind::InvalidCursor && pos.cursor.is_some() => {
                    tracing::warn!(kind, error = %e, "the store cannot continue from the checkpoint's cursor; rescanning the stage from the start (version scoping skips what is done)");
                    pos.cursor = None;
                    continue;
                }
                Err(e) => return Err(store_err("scanning entities")(e)),
            };
            fault_point!(self, index, pos.phase, batch_no, BeforeWrite);
            let n = page.entities.len() as u64;
            let mut counts = RunCounts::default();
            // Where the store can, the checkpoint is committed with the batch's writes.
            let with_checkpoint =
                self.store
                    .features()
                    .atomic_batch_with_meta
                    .map(|_| BatchCheckpoint {
                        stage: index,
                        phase: pos.phase,
                        base: pos.counts,
                        from: pos.cursor.clone(),
                        next: page.cursor.clone(),
                    });
            let write = self
                .write_batch(
                    BatchAt {
                        index,
                        phase: pos.phase,
                        batch_no,
                        from,
                    },
                    page.entities,
                    &compute,
                    with_checkpoint.as_ref(),
                    &mut counts,
                )
                .instrument(batch_span(batch_no));
            // Reading the next page while this batch is written is sound: a
            // batch writes only the entities of its own page, and the next
            // page holds entities after its cursor still at `from`. Not
            // under a rate limit, where the page would wait (and age) in
            // memory. A failed read ahead is read again, and its error
            // handled, at the top of the loop.
            let read_ahead = async {
                match page.cursor.clone() {
                    Some(next) if self.pace.is_none() => {
                        let read = self.stage_page(kind, from, Some(next.clone())).await;
                        read.ok().map(|p| (next, p))
                    }
                    _ => None,
                }
            };
            // The previous batch's checkpoint is written while this batch is
            // (see [`Behind`]). The read ahead is polled first, so that its
            // request leaves before the batch's writes: the next page's scan
            // step then does not wait behind them in the server's queue (on
            // the page's own server, the writes take longer than the step).
            let (read, written, caught_up) =
                futures::join!(read_ahead, write, self.catch_up(index, behind.take()));
            caught_up?;
            ahead = read;
            let written = written?;
            counts.unmatched_sources += self.unmatched.swap(0, std::sync::atomic::Ordering::SeqCst);
            if !written.before_checkpoint {
                fault_point!(self, index, pos.phase, batch_no, BeforeCheckpoint);
            }
            pos.counts.add(&counts);
            pos.cursor = page.cursor.clone();
            tracing::info!(
                stage = index,
                kind,
                batch = batch_no,
                entities = n,
                processed = pos.counts.processed,
                changed = pos.counts.changed,
                conflicts = pos.counts.conflicts,
                "checkpoint"
            );
            let done = Behind {
                batch_no,
                pos: pos.clone(),
            };
            if written.checkpointed {
                self.after_checkpoint(index, pos.phase, batch_no, pos)?;
            } else if with_checkpoint.is_some() {
                // The next batch commits its checkpoint with its writes: this
                // one must land first.
                self.catch_up(index, Some(done)).await?;
            } else {
                behind = Some(done);
            }
            self.throttle(n).await;
            batch_no += 1;
            if page.cursor.is_none() {
                return self.catch_up(index, behind.take()).await;
            }
        }
    }

    /// Writes the checkpoint of a batch whose writes are done (`behind`, if
    /// any), then passes its crash point and reports it.
    async fn catch_up(&self, index: usize, behind: Option<Behind>) -> Result<()> {
        let Some(Behind { batch_no, pos }) = behind else {
            return Ok(());
        };
        self.checkpoint(index, &pos)
            .instrument(tracing::debug_span!("checkpoint", batch = batch_no))
            .await?;
        self.after_checkpoint(index, pos.phase, batch_no, &pos)
    }

    /// Computes and writes one batch, retrying conflicts.
    ///
    /// With `checkpoint` (a store whose [`AtomicBatchWithMeta::write_batch_with_meta`](crate::store::AtomicBatchWithMeta::write_batch_with_meta) is
    /// atomic), every write call commits a checkpoint with its writes that
    /// records exactly what they did: the counts, and the cursor past the batch
    /// once its last writes all applied (before that, the cursor the batch was
    /// read from: a resumed scan finds the entities not yet written, and only
    /// those, still at the stage's version).
    async fn write_batch(
        &self,
        at: BatchAt,
        entities: Vec<Entity>,
        compute: &Compute<'_>,
        checkpoint: Option<&BatchCheckpoint>,
        counts: &mut RunCounts,
    ) -> Result<Written> {
        let mut written = Written::default();
        let mut pending = entities;
        let mut attempt = 0u32;
        while !pending.is_empty() {
            let batch = AttemptAt {
                at: &at,
                compute,
                checkpoint,
                first: attempt == 0,
            };
            let retry_keys = self
                .write_attempt(batch, pending, counts, &mut written)
                .await?;
            if retry_keys.is_empty() {
                break;
            }
            crate::telemetry::retry("write", retry_keys.len() as u64);
            attempt += 1;
            pending = self
                .reread_conflicts(retry_keys, at.from, attempt, counts)
                .await?;
        }
        Ok(written)
    }

    /// One attempt at the `pending` entities of a batch: computes and writes them
    /// in one call, counting what each write did. Returns the keys of the writes
    /// that met a conflict.
    async fn write_attempt(
        &self,
        batch: AttemptAt<'_, '_>,
        pending: Vec<Entity>,
        counts: &mut RunCounts,
        written: &mut Written,
    ) -> Result<Vec<Key>> {
        let (writes, changed) = self.computed_writes(batch.compute, pending, counts).await?;
        let outcomes = match batch.checkpoint {
            None => self
                .store
                .write_checked(writes.clone())
                .await
                .map_err(store_err("writing entities"))?,
            Some(c) => {
                if batch.first {
                    // The batch's checkpoint commits with these writes.
                    let at = batch.at;
                    fault_point!(self, at.index, at.phase, at.batch_no, BeforeCheckpoint);
                    written.before_checkpoint = true;
                }
                let outcomes = self
                    .write_with_checkpoint(c, writes.clone(), changed.clone(), *counts, true)
                    .await?;
                written.checkpointed = outcomes.iter().all(|o| *o == WriteOutcome::Applied);
                outcomes
            }
        };
        let mut retry_keys = Vec::new();
        for (w, outcome) in writes.into_iter().zip(&outcomes) {
            if *outcome == WriteOutcome::Conflict
                && let Write::Replace { expected, .. } = w
            {
                retry_keys.push(expected.key);
            }
        }
        count_outcomes(counts, &outcomes, &changed);
        Ok(retry_keys)
    }

    /// The writes of a part: each entity's new value replacing the old one, with
    /// whether it changed the data; an entity the step leaves alone is skipped.
    async fn computed_writes(
        &self,
        compute: &Compute<'_>,
        part: Vec<Entity>,
        counts: &mut RunCounts,
    ) -> Result<(Vec<Write>, Vec<bool>)> {
        let computed = compute.compute(self, &part).await?;
        let mut writes = Vec::with_capacity(part.len());
        let mut changed_flags = Vec::with_capacity(part.len());
        for (old, new) in part.into_iter().zip(computed) {
            match new {
                Some((new, changed)) => {
                    writes.push(Write::Replace { expected: old, new });
                    changed_flags.push(changed);
                }
                None => counts.skipped += 1,
            }
        }
        Ok((writes, changed_flags))
    }

    /// Re-reads the entities whose writes met a conflict: those still at the
    /// stage's version `from` are retried (up to `max_retries` attempts), the
    /// others (deleted, migrated by someone else, or changing too often) skipped.
    async fn reread_conflicts(
        &self,
        keys: Vec<Key>,
        from: Version,
        attempt: u32,
        counts: &mut RunCounts,
    ) -> Result<Vec<Entity>> {
        let mut pending = Vec::new();
        for key in keys {
            match self
                .store
                .get(&key)
                .await
                .map_err(store_err("re-reading a changed entity"))?
            {
                Some(e) if e.version == from && attempt <= self.options.max_retries => {
                    pending.push(e)
                }
                Some(e) if e.version == from => {
                    tracing::warn!(%key, "entity kept changing; leaving it to the census sweep");
                    counts.skipped += 1;
                }
                // Deleted, or migrated by someone else (a lazy reader, a new writer).
                _ => counts.skipped += 1,
            }
        }
        Ok(pending)
    }

    /// Writes part of a batch and, in the same store call (one transaction),
    /// the checkpoint that records it: `counts` (the batch's so far) plus
    /// what these writes did, and the cursor past the batch only when these
    /// are its `last_writes` and all of them apply.
    async fn write_with_checkpoint(
        &self,
        c: &BatchCheckpoint,
        writes: Vec<Write>,
        changed: Vec<bool>,
        counts: RunCounts,
        last_writes: bool,
    ) -> Result<Vec<WriteOutcome>> {
        let (stage, phase) = (c.stage, c.phase);
        let mut before = c.base;
        before.add(&counts);
        before.unmatched_sources += self.unmatched.load(std::sync::atomic::Ordering::SeqCst);
        let (from, next) = (c.from.clone(), c.next.clone());
        if let Some(part) = self.part {
            return part
                .write_and_checkpoint(writes, move |p, outcomes| {
                    let mut counts = before;
                    count_outcomes(&mut counts, outcomes, &changed);
                    let done = last_writes && counts.conflicts == before.conflicts;
                    p.cursor = if done { next.clone() } else { from.clone() };
                    p.counts = counts;
                })
                .await;
        }
        self.held()?
            .write_and_update(writes, move |doc, outcomes| {
                let mut counts = before;
                count_outcomes(&mut counts, outcomes, &changed);
                let done = last_writes && counts.conflicts == before.conflicts;
                if let Some(run) = doc.running.as_mut() {
                    run.stage = stage;
                    run.phase = phase;
                    run.cursor = if done { next.clone() } else { from.clone() };
                    run.counts = counts;
                    run.checkpoints += 1;
                }
            })
            .await
    }

    async fn run_local(
        &self,
        index: usize,
        kind: &str,
        from: Version,
        steps: &[Step],
        pos: &mut Position,
    ) -> Result<()> {
        self.batched(index, kind, from, pos, Compute::Local(steps))
            .await
    }

    /// Runs a stage inside the store. `Ok(false)` when the store answered
    /// `Unsupported` for these steps before writing anything (the caller runs
    /// the stage on the client instead).
    async fn run_pushdown(
        &self,
        facet: &dyn Pushdown,
        index: usize,
        kind: &str,
        from: Version,
        steps: Vec<PushStep>,
        pos: &mut Position,
    ) -> Result<bool> {
        let mut batch_no = 0u64;
        loop {
            self.check_continue()?;
            fault_point!(self, index, 0, batch_no, BeforeWrite);
            let page = self
                .pushdown_page(
                    facet,
                    PushdownRequest {
                        kind: kind.to_owned(),
                        from,
                        steps: steps.clone(),
                        cursor: pos.cursor.clone(),
                        limit: self.options.pushdown_batch_size.max(1),
                    },
                )
                .instrument(batch_span(batch_no))
                .await;
            let page = match page {
                Ok(p) => p,
                Err(e) if e.kind() == ErrorKind::InvalidCursor && pos.cursor.is_some() => {
                    pos.cursor = None;
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Unsupported && batch_no == 0 => {
                    tracing::info!(stage = index, kind, reason = %e, "pushdown declined; running on the client");
                    // A cursor of the server-side path (from a resumed run) is not a scan
                    // cursor: the client path starts over, which version scoping makes safe.
                    pos.cursor = None;
                    return Ok(false);
                }
                Err(e) => return Err(store_err("updating entities in the store")(e)),
            };
            fault_point!(self, index, 0, batch_no, BeforeCheckpoint);
            pos.counts.processed += page.advanced;
            pos.counts.changed += page.changed_entities;
            pos.cursor = page.cursor.clone();
            self.checkpoint(index, pos).await?;
            self.after_checkpoint(index, 0, batch_no, pos)?;
            tracing::info!(
                stage = index,
                kind,
                batch = batch_no,
                advanced = page.advanced,
                "checkpoint (pushdown)"
            );
            self.throttle(page.advanced).await;
            batch_no += 1;
            if page.cursor.is_none() {
                return Ok(true);
            }
        }
    }

    async fn run_transfer_targets(
        &self,
        index: usize,
        transfer: &Transfer,
        target_from: Version,
        text: &str,
        join: &JoinIndex,
        pos: &mut Position,
    ) -> Result<()> {
        self.batched(
            index,
            &transfer.to_kind,
            target_from,
            pos,
            Compute::Target { text, index: join },
        )
        .await
    }

    async fn run_move_sources(
        &self,
        index: usize,
        transfer: &Transfer,
        from: Version,
        delivered: &SpillMap<Values>,
        pos: &mut Position,
    ) -> Result<()> {
        self.batched(
            index,
            &transfer.prop.kind,
            from,
            pos,
            Compute::Source(transfer, delivered),
        )
        .await
    }

    /// The sources that may join the given targets, fetched in one scan per chunk of values.
    async fn fetch_sources(&self, transfer: &Transfer, targets: &[&Entity]) -> Result<Vec<Entity>> {
        let mut conditions: Vec<Condition> = transfer
            .source_conditions
            .iter()
            .map(atom_condition)
            .collect();
        match &transfer.join {
            Some(join) => {
                let mut values: Vec<Value> = targets
                    .iter()
                    .flat_map(|t| eval::lookup_values(transfer, t).unwrap_or_default())
                    .collect();
                values.sort();
                values.dedup();
                if values.is_empty() {
                    return Ok(Vec::new());
                }
                let mut out = Vec::new();
                for chunk in values.chunks(500) {
                    let mut conds = conditions.clone();
                    conds.push(Condition {
                        path: join.source.path.clone(),
                        values: chunk.to_vec(),
                    });
                    out.extend(self.scan_all(&transfer.prop.kind, conds).await?);
                }
                dedup_by_key(&mut out);
                Ok(out)
            }
            None => {
                conditions.shrink_to_fit();
                self.scan_all(&transfer.prop.kind, conditions).await
            }
        }
    }

    async fn scan_all(&self, kind: &str, conditions: Vec<Condition>) -> Result<Vec<Entity>> {
        let filter = Filter {
            version: VersionFilter::Any,
            conditions,
        };
        let mut out = Vec::new();
        let mut cursor = None;
        loop {
            let page = self
                .store
                .scan(
                    kind,
                    ScanRequest {
                        filter: filter.clone(),
                        cursor,
                        limit: self.options.batch_size.max(100),
                    },
                )
                .await
                .map_err(store_err("looking up join partners"))?;
            out.extend(page.entities);
            match page.cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(out),
            }
        }
    }

    /// Brings one entity forward through the steps of its kind from its version to `target`.
    /// Returns the new entity and whether its data changed.
    pub(crate) async fn bring_forward(
        &self,
        entity: &Entity,
        target: Version,
    ) -> Result<(Entity, bool)> {
        let mut e = entity.clone();
        let mut changed = false;
        let steps = self
            .history
            .get(&entity.key.kind)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for step in steps
            .iter()
            .filter(|s| s.version > entity.version && s.version <= target)
        {
            match &step.op {
                StepOp::Local(_) | StepOp::Code(_) => {
                    changed |= apply_per_entity(step, &e.key, &mut e.value)?;
                }
                StepOp::TransferTarget { transfer, .. } => {
                    let sources = self.fetch_sources(transfer, &[&e]).await?;
                    let refs: Vec<&Entity> = sources
                        .iter()
                        .filter(|s| eval::source_matches(transfer, s))
                        .collect();
                    let resolution = self.resolve(transfer, &e, &refs, &step_text(step))?;
                    changed |= resolution
                        .apply(transfer, &mut e.value)
                        .is_some_and(|eff| eff.is_changed());
                }
                StepOp::MoveSource { .. } => {
                    // A late source: its targets were written before it existed, so
                    // nothing received its value and it keeps the property.
                }
            }
            e.version = step.version;
        }
        e.version = e.version.max(target);
        Ok((e, changed))
    }

    /// Resolves one target: a conflict fails the run, unless forced (or a dry
    /// run, which records it), where the greatest source key wins.
    fn resolve(
        &self,
        transfer: &Transfer,
        target: &Entity,
        sources: &[&Entity],
        text: &str,
    ) -> Result<TargetResolution> {
        let resolution = eval::resolve_target(transfer, target, sources);
        let TargetResolution::Conflict { writes } = &resolution else {
            return Ok(resolution);
        };
        let description = format!(
            "{}: {}",
            target.key,
            writes
                .iter()
                .map(|(k, v)| match v {
                    Some(v) => format!("{k}={v}"),
                    None => format!("{k}=(absent)"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        if (self.collect_conflicts || self.options.force_unsafe)
            && let Ok(mut c) = self.conflicts.lock()
        {
            c.push(crate::migration::conflict::Conflict {
                statement: text.to_owned(),
                target: description.clone(),
            });
        }
        if self.options.force_unsafe || self.collect_conflicts {
            Ok(resolution.forced())
        } else {
            Err(MigrateError::Unsafe {
                statement: text.to_owned(),
                conflicts: vec![description],
                others: Vec::new(),
            })
        }
    }
}

fn step_text(step: &Step) -> String {
    match &step.op {
        StepOp::Local(s) => s.to_string(),
        StepOp::Code(c) => format!("code migration on {}", c.kind()),
        StepOp::TransferTarget { transfer, is_move } => {
            if *is_move {
                Statement::Move(transfer.clone()).to_string()
            } else {
                Statement::Copy(transfer.clone()).to_string()
            }
        }
        StepOp::MoveSource { transfer } => Statement::Move(transfer.clone()).to_string(),
    }
}

fn dedup_by_key(entities: &mut Vec<Entity>) {
    entities.sort_by(|a, b| a.key.cmp(&b.key));
    entities.dedup_by(|a, b| a.key == b.key);
}

impl Runner<'_> {
    /// How this run's passes read.
    pub(crate) fn reading(&self) -> join::Reading<'_> {
        join::Reading {
            store: self.store,
            page: self.options.batch_size,
            estimate: self.options.estimate_totals,
            progress: self.progress,
        }
    }

    /// Builds the index of a move or copy and, before anything is written,
    /// runs the safety check: an unsafe statement fails (a dry run records its
    /// conflicts instead; a forced run skips the check).
    pub(crate) async fn transfer_index(&self, t: &Transfer, text: &str) -> Result<JoinIndex> {
        let opts = crate::lang::eval::EvalOptions {
            force: self.options.force_unsafe,
            ..crate::lang::eval::EvalOptions::default()
        };
        if let Some(index) = self.prebuilt.lock().ok().and_then(|mut p| p.take()) {
            // Built and checked before the run was recorded (`precheck`).
            return Ok(index);
        }
        let index = join::build(self.reading(), t, &opts, self.options.join_memory).await?;
        if index.spills() > 0 {
            tracing::info!(
                spills = index.spills(),
                sources = index.sources_read,
                "the join index outgrew its memory budget and spilled to a scratch file"
            );
        }
        // Also under `--force-unsafe`: the report lists the targets it forced.
        let found = join::check(self.reading(), &index).await?;
        if found.conflict_count == 0 {
            return Ok(index);
        }
        if self.collect_conflicts || self.options.force_unsafe {
            if let Ok(mut c) = self.conflicts.lock() {
                c.extend(found.conflicts.into_iter().map(|target| {
                    crate::migration::conflict::Conflict {
                        statement: text.to_owned(),
                        target,
                    }
                }));
            }
            return Ok(index);
        }
        Err(MigrateError::Unsafe {
            statement: text.to_owned(),
            conflicts: found.conflicts,
            others: Vec::new(),
        })
    }
}

/// How a stage computes the new state of a batch of entities read at its version.
pub(crate) enum Compute<'s> {
    /// Per-entity steps.
    Local(&'s [Step]),
    /// The target side of a move or copy.
    Target {
        /// Its text, for messages.
        text: &'s str,
        /// The index of its sources.
        index: &'s JoinIndex,
    },
    /// The source side of a move, with what the targets received.
    Source(&'s Transfer, &'s SpillMap<Values>),
}

impl Compute<'_> {
    /// One result per entity: `Some((new, data changed))`, or `None` to leave it.
    async fn compute(
        &self,
        runner: &Runner<'_>,
        batch: &[Entity],
    ) -> Result<Vec<Option<(Entity, bool)>>> {
        match self {
            Compute::Local(steps) => {
                let to = steps.last().map_or(0, |s| s.version);
                batch
                    .iter()
                    .map(|e| {
                        let mut new = e.clone();
                        let mut changed = false;
                        for step in *steps {
                            changed |= apply_per_entity(step, &new.key, &mut new.value)?;
                        }
                        new.version = to;
                        Ok(Some((new, changed)))
                    })
                    .collect()
            }
            Compute::Target { index, text } => {
                let forced = runner.options.force_unsafe || runner.collect_conflicts;
                let (out, conflict) = join::compute_targets(index, batch, forced)?;
                match conflict {
                    None => Ok(out),
                    Some(target) => Err(MigrateError::Unsafe {
                        statement: (*text).to_owned(),
                        conflicts: vec![format!(
                            "{target}: its sources write different values (the data changed since the safety check)"
                        )],
                        others: Vec::new(),
                    }),
                }
            }
            Compute::Source(transfer, delivered) => {
                let (out, kept) = join::compute_sources(transfer, delivered, batch)?;
                runner
                    .unmatched
                    .fetch_add(kept, std::sync::atomic::Ordering::SeqCst);
                Ok(out)
            }
        }
    }
}
