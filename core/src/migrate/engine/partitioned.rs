//! Partitioned stages: many workers share one stage (`tern up --workers N`,
//! `tern worker`).
//!
//! A stage that runs per-entity steps on one kind (client-side or pushed
//! down) is split by the store's [`Partitions`](crate::store::Partitions)
//! facet when it starts; the split is recorded in the state document and
//! never taken again for that stage (a resumed run, and every worker, scans
//! the recorded ranges). Workers claim partitions one at a time
//! ([`super::super::partition`]); the runner that holds the lease waits for
//! every partition to be done, then moves on: the census, the ledger entry
//! and "applied" happen once, after the last partition. Move and copy stages
//! (their one index build) and kind renames run unpartitioned, by the runner.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Migrator, RunMode};
use crate::migrate::partition::{self, Claim, Claimant, Next, StateCache};
use crate::migrate::run::{Position, Runner};
use crate::migration::error::{MigrateError, Result};
use crate::migration::lease::Lease;
use crate::migration::plan::{self, Stage};
use crate::migration::progress::{NoProgress, Progress, StageStart};
use crate::migration::source::Migration;
use crate::migration::state::{self, RunCounts, StateDoc};
use crate::store::{Store, StoreExt};

/// What `tern worker` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkReport {
    /// Partitions this worker ran to their end.
    pub partitions: u64,
    /// Partitions it started and lost to another worker (its lease expired).
    pub lost: u64,
    /// When the runner's lease was free, this worker ran `tern up` itself: its report.
    pub up: Option<super::UpReport>,
}

/// What every worker of one partitioned stage shares.
pub(super) struct StageWork<'a> {
    pub(super) store: &'a Arc<dyn Store>,
    pub(super) cache: StateCache,
    pub(super) migration: &'a Migration,
    pub(super) stage_index: usize,
    pub(super) stage: &'a Stage,
    pub(super) history: &'a std::collections::BTreeMap<String, Vec<plan::Step>>,
    /// The runner's lease, in the process that holds it.
    pub(super) lease: Option<&'a Lease>,
    pub(super) progress: &'a PartsProgress<'a>,
    /// Wakes this process's idle workers when one of its workers finishes or
    /// drops a partition: they look again at once instead of after a poll
    /// period (up to a second: the stage's end waited for it).
    pub(super) wake: tokio::sync::Notify,
}

/// Sums the progress of a stage's partitions for the progress observer.
pub(super) struct PartsProgress<'a> {
    inner: &'a dyn Progress,
    /// The migration's counts before the stage.
    base: RunCounts,
    parts: Mutex<Vec<RunCounts>>,
}

impl<'a> PartsProgress<'a> {
    fn new(inner: &'a dyn Progress, base: RunCounts, parts: Vec<RunCounts>) -> Self {
        PartsProgress {
            inner,
            base,
            parts: Mutex::new(parts),
        }
    }

    fn report(&self, index: usize, counts: RunCounts) {
        let sum = {
            let mut parts = self
                .parts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(p) = parts.get_mut(index) {
                *p = counts;
            }
            let mut sum = RunCounts::default();
            for p in parts.iter() {
                sum.add(p);
            }
            sum
        };
        let mut total = self.base;
        total.add(&sum);
        self.inner.checkpoint(sum.processed, &total);
    }
}

/// One partition's view of [`PartsProgress`].
struct PartProgress<'p> {
    all: &'p PartsProgress<'p>,
    index: usize,
}

impl Progress for PartProgress<'_> {
    fn stage_started(&self, _: &StageStart<'_>) {}
    fn checkpoint(&self, _: u64, counts: &RunCounts) {
        self.all.report(self.index, *counts);
    }
    fn stage_finished(&self, _: &RunCounts) {}
    fn note(&self, text: &str) {
        self.all.inner.note(text);
    }
}

/// Does `stage` run partitioned here? A stage of per-entity steps, on a
/// store with the facet, when more than one worker or a partition count was
/// asked for, or when the stage was recorded partitioned (a resumed run keeps
/// its split, whatever its options).
pub(super) fn partitioned_kind<'s>(
    migrator: &Migrator,
    store: &dyn Store,
    doc: &StateDoc,
    (migration, stage_index): (u32, usize),
    stage: &'s Stage,
    mode: &RunMode<'_>,
) -> Option<&'s str> {
    let Stage::Local { kind, .. } = stage else {
        return None;
    };
    if mode.is_dry() || store.features().partitions.is_none() {
        return None;
    }
    let asked = migrator.run.workers > 1 || migrator.run.partitions.is_some();
    (asked || partition::recorded(doc, migration, stage_index).is_some()).then_some(kind.as_str())
}

impl Migrator {
    /// How long a partition's lease lasts without renewal, and how often an
    /// idle worker looks for work.
    fn poll_period(&self) -> Duration {
        (self.lease.ttl / 3).clamp(Duration::from_millis(20), Duration::from_secs(1))
    }

    /// Runs stage `stage_index` of `m` partitioned: records its split (unless
    /// recorded), runs `--workers` workers here until every partition is
    /// done (also those other processes hold), and adds their counts to `pos`.
    pub(super) async fn run_partitioned(
        &self,
        store: &Arc<dyn Store>,
        runner: &Runner<'_>,
        m: &Migration,
        (stage_index, stage, kind): (usize, &Stage, &str),
        pos: &mut Position,
    ) -> Result<()> {
        let lease = runner.held()?;
        let doc = lease.snapshot().await;
        if partition::recorded(&doc, m.id, stage_index).is_none() {
            let Some(facet) = store.features().partitions else {
                return Err(MigrateError::Dirty(
                    "the store lost its partitions facet".to_owned(),
                ));
            };
            let count = self
                .run
                .partitions
                .unwrap_or(self.run.workers.max(1) * 4)
                .max(1);
            let parts = facet
                .split(kind, count)
                .await
                .map_err(MigrateError::store("splitting a kind into partitions"))?;
            if parts.is_empty() {
                return Err(MigrateError::Store {
                    context: "splitting a kind into partitions".to_owned(),
                    source: crate::store::Error::new(
                        crate::store::ErrorKind::Unexpected,
                        format!(
                            "the {} store split kind {kind:?} into no partition",
                            store.info().scheme
                        ),
                    ),
                });
            }
            runner.progress.note(&format!(
                "stage {}: {kind} split into {} partitions",
                stage_index + 1,
                parts.len()
            ));
            lease
                .update(|doc| partition::record_split(doc, stage_index, kind, &parts))
                .await?;
        }
        let doc = lease.snapshot().await;
        let recorded = partition::recorded(&doc, m.id, stage_index).unwrap_or_else(|| {
            // Recorded just above: the snapshot holds it.
            state::StagePartitions {
                stage: stage_index,
                kind: kind.to_owned(),
                parts: Vec::new(),
            }
        });
        let progress = PartsProgress::new(
            runner.progress,
            pos.counts,
            recorded.parts.iter().map(|p| p.counts).collect(),
        );
        let history = runner.history;
        let work = StageWork {
            store,
            cache: partition::new_cache(store.as_ref()).await?,
            migration: m,
            stage_index,
            stage,
            history,
            lease: Some(lease),
            progress: &progress,
            wake: tokio::sync::Notify::new(),
        };
        self.run_workers(&work, self.run.workers.max(1)).await?;
        let doc = state::load(store.as_ref()).await?.doc;
        let Some(done) = partition::recorded(&doc, m.id, stage_index).filter(|p| p.all_done())
        else {
            return Err(MigrateError::LeaseLost {
                token: lease.token(),
            });
        };
        pos.counts.add(&done.counts());
        pos.cursor = None;
        Ok(())
    }

    /// Runs `count` workers on the stage until no partition is left.
    pub(super) async fn run_workers(
        &self,
        work: &StageWork<'_>,
        count: usize,
    ) -> Result<WorkReport> {
        let reports =
            futures::future::try_join_all((0..count).map(|w| self.partition_worker(work, w)))
                .await?;
        let mut total = WorkReport::default();
        for r in reports {
            total.partitions += r.partitions;
            total.lost += r.lost;
        }
        Ok(total)
    }

    /// One worker: claims partitions and runs them until every partition of
    /// the stage is done (or the stage is no longer running).
    async fn partition_worker(&self, work: &StageWork<'_>, number: usize) -> Result<WorkReport> {
        let who = Claimant {
            owner: uuid::Uuid::new_v4().to_string(),
            holder: partition::holder(number),
            ttl: self.lease.ttl,
            renew: self.lease.renew,
        };
        let mut report = WorkReport::default();
        loop {
            if self.cancel.is_cancelled() {
                return Err(MigrateError::Interrupted);
            }
            if let Some(lease) = work.lease
                && lease.is_lost()
            {
                return Err(MigrateError::LeaseLost {
                    token: lease.token(),
                });
            }
            // Created before looking: a partition finished meanwhile wakes it.
            let woken = work.wake.notified();
            match partition::claim_next(
                work.store,
                &work.cache,
                (work.migration.id, work.stage_index),
                &who,
            )
            .await?
            {
                Next::Claimed(claim) => {
                    let ran = self.run_claim(work, claim).await;
                    work.wake.notify_waiters();
                    if ran? {
                        report.partitions += 1;
                    } else {
                        report.lost += 1;
                    }
                }
                Next::Wait => {
                    tokio::select! {
                        () = tokio::time::sleep(self.poll_period()) => {}
                        () = woken => {}
                    }
                }
                Next::AllDone | Next::Gone => return Ok(report),
            }
        }
    }

    /// Runs one claimed partition to its end: `Ok(true)`; `Ok(false)` when
    /// another worker took it over meanwhile (this one drops it).
    async fn run_claim(&self, work: &StageWork<'_>, claim: Claim) -> Result<bool> {
        let progress = PartProgress {
            all: work.progress,
            index: claim.index(),
        };
        let mut pos = Position {
            phase: 0,
            cursor: claim.cursor.clone(),
            counts: claim.counts,
            stage_base: 0,
        };
        let outcome = {
            let runner = Runner {
                lease: work.lease,
                part: Some(&claim),
                pace: crate::migrate::pace::RateLimiter::new(
                    self.run
                        .max_rate
                        .map(|r| r / self.run.workers.max(1) as f64),
                ),
                ..self.unleased_runner(
                    work.store.as_ref(),
                    (work.migration.id, &work.migration.name),
                    &progress,
                    work.history,
                )
            };
            runner
                .run_stage(work.stage_index, work.stage, &mut pos)
                .await
        };
        let label = claim.partition.label.clone();
        let outcome = match outcome {
            Ok(()) => claim.finish(pos.counts).await,
            Err(e) => {
                if claim.is_lost() {
                    Err(e)
                } else {
                    // Dropped unfinished: its lease expires and another worker resumes it.
                    return Err(e);
                }
            }
        };
        match outcome {
            Ok(()) => Ok(true),
            Err(MigrateError::LeaseLost { token }) => {
                tracing::warn!(partition = %label, token, "partition taken over by another worker; dropping it");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// `tern worker`: helps whatever runs. While a runner holds the lease and
    /// runs a partitioned stage, claims its partitions (`--workers` at a time)
    /// and runs them; when the lease is free (no runner, or a dead one's
    /// expired), runs `tern up` itself, so a set of workers finishes the work
    /// whichever of them dies. Returns when no migration is pending or running.
    ///
    /// # Errors
    /// As [`Migrator::up`]; a worker never waits for the lease.
    pub async fn work(&self) -> Result<WorkReport> {
        let mut report = WorkReport::default();
        let store = Arc::clone(&self.store);
        let no_wait = crate::migrate::LeaseOptions {
            wait: None,
            ..self.lease.clone()
        };
        loop {
            if self.cancel.is_cancelled() {
                return Err(MigrateError::Interrupted);
            }
            let doc = state::load(store.as_ref()).await?.doc;
            let pending = self.pending(&doc, None)?;
            if pending.is_empty() && doc.running.is_none() {
                return Ok(report);
            }
            let now = store
                .now()
                .await
                .map_err(MigrateError::store("reading the clock"))?;
            if doc.lease.as_ref().is_none_or(|l| l.expires_at <= now) {
                match self
                    .up_on(Arc::clone(&store), None, &mut RunMode::Apply, &no_wait)
                    .await
                {
                    Ok(up) => {
                        report.up = Some(up);
                        continue;
                    }
                    Err(MigrateError::LockHeld { .. }) => {
                        tokio::time::sleep(self.poll_period()).await;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            if let Some(run) = &doc.running
                && let Some(parts) = run.partitions.as_ref().filter(|p| !p.all_done())
            {
                let Some(m) = self.set.get(run.migration) else {
                    return Err(MigrateError::Dirty(format!(
                        "the running migration {} has no file here; start the worker with the same migrations as the runner",
                        run.migration
                    )));
                };
                if m.checksum != run.checksum {
                    return Err(MigrateError::ChecksumMismatch {
                        id: m.id,
                        name: m.name.clone(),
                        applied: run.checksum.clone(),
                        current: m.checksum.clone(),
                    });
                }
                let plan = plan::plan(m, &doc.kinds);
                let history = plan::history(&self.set, m.id);
                let Some(stage) = plan.stages.get(parts.stage) else {
                    return Err(MigrateError::Dirty(format!(
                        "the running migration {} has no stage {}; start the worker with the same migrations as the runner",
                        m.id,
                        parts.stage + 1
                    )));
                };
                let progress = PartsProgress::new(
                    &NoProgress,
                    RunCounts::default(),
                    parts.parts.iter().map(|p| p.counts).collect(),
                );
                let work = StageWork {
                    store: &store,
                    cache: partition::new_cache(store.as_ref()).await?,
                    migration: m,
                    stage_index: parts.stage,
                    stage,
                    history: &history,
                    lease: None,
                    progress: &progress,
                    wake: tokio::sync::Notify::new(),
                };
                let done = self.run_workers(&work, self.run.workers.max(1)).await?;
                report.partitions += done.partitions;
                report.lost += done.lost;
                continue;
            }
            tokio::time::sleep(self.poll_period()).await;
        }
    }
}
