//! The migrator: validates the ledger, takes the lease, runs pending migrations
//! stage by stage with a checkpoint per batch, proves completion by census,
//! and records the ledger.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use futures::TryStreamExt;
use tracing::Instrument;

use super::join;
use super::options::RunOptions;
use super::overlay::{Change, OverlayStore};
use super::rename;
use super::run::{Position, Runner};
use crate::migration::error::{MigrateError, Result};
use crate::migration::lease::{Lease, LeaseOptions};
use crate::migration::plan::{self, Plan, Stage};
#[cfg(feature = "fault-injection")]
use crate::migration::progress::FaultHook;
use crate::migration::progress::{CancelFlag, NoProgress, Progress, StageStart};
use crate::migration::report::{MigrationReport, ledger_entry};
use crate::migration::source::{Migration, MigrationSet};
use crate::migration::state::{self, LedgerEntry, RunCounts, RunState, StateDoc};
use crate::model::{Key, Version};
use crate::store::{Filter, Store, StoreExt, VersionFilter, scan_pages};

mod abandon;
mod late;
mod partitioned;

pub use abandon::Abandoned;
pub use partitioned::WorkReport;

/// A migration that is applied, pending, or half-applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    /// The number.
    pub id: u32,
    /// The name.
    pub name: String,
    /// Applied (with when), or not.
    pub applied_at: Option<i64>,
    /// A run of it was interrupted and will resume.
    pub in_progress: bool,
}

/// What `tern status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Every known migration, in order.
    pub migrations: Vec<MigrationStatus>,
    /// Each kind's current version.
    pub kinds: BTreeMap<String, Version>,
    /// The lease, if held (or left behind by a crashed runner).
    pub lease: Option<state::LeaseRecord>,
    /// The checkpoint of an interrupted run.
    pub running: Option<RunState>,
    /// The checkpoint of a running or interrupted `tern sweep` (with its
    /// partitions, when it sweeps partitioned).
    pub sweep: Option<state::SweepState>,
    /// The store's clock now (to judge the lease).
    pub now: i64,
}

/// What `tern up` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpReport {
    /// The migrations applied, in order.
    pub applied: Vec<MigrationReport>,
    /// With nothing pending: kinds whose entities were below the kind's
    /// version (written late by old code) and how many were brought forward.
    pub swept_late: Vec<(String, u64)>,
}

/// What a dry run found for one stage.
#[derive(Debug, Clone, PartialEq)]
pub struct StagePreview {
    /// The migration.
    pub migration: u32,
    /// The stage, described.
    pub description: String,
    /// Entities it would process (advance) and change.
    pub counts: RunCounts,
}

/// What `tern plan` / `tern up --dry-run` found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DryRun {
    /// Per stage, in order.
    pub stages: Vec<StagePreview>,
    /// Sample changes (up to the requested number per kind), sorted by key.
    pub samples: Vec<(Key, Change)>,
    /// Conflicts of unsafe move/copy statements (empty when safe).
    pub conflicts: Vec<crate::migration::conflict::Conflict>,
    /// Total entities that would change.
    pub changed_entities: u64,
}

/// Runs migrations against a store.
pub struct Migrator {
    store: Arc<dyn Store>,
    set: MigrationSet,
    run: RunOptions,
    lease: LeaseOptions,
    progress: Arc<dyn Progress>,
    cancel: CancelFlag,
    #[cfg(feature = "fault-injection")]
    faults: Option<FaultHook>,
}

impl std::fmt::Debug for Migrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migrator")
            .field("store", &self.store.info())
            .field("migrations", &self.set.len())
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl Migrator {
    /// A migrator for `set` on `store`, with default options.
    pub fn new(store: Arc<dyn Store>, set: MigrationSet) -> Migrator {
        Migrator {
            store,
            set,
            run: RunOptions::default(),
            lease: LeaseOptions::default(),
            progress: Arc::new(NoProgress),
            cancel: CancelFlag::new(),
            #[cfg(feature = "fault-injection")]
            faults: None,
        }
    }

    /// Sets the batch options.
    #[must_use]
    pub fn with_run_options(mut self, run: RunOptions) -> Migrator {
        self.run = run;
        self
    }

    /// Sets the lease options.
    #[must_use]
    pub fn with_lease_options(mut self, lease: LeaseOptions) -> Migrator {
        self.lease = lease;
        self
    }

    /// Sets the progress receiver.
    #[must_use]
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Migrator {
        self.progress = progress;
        self
    }

    /// Sets the flag that stops a run after its current batch.
    #[must_use]
    pub fn with_cancel(mut self, cancel: CancelFlag) -> Migrator {
        self.cancel = cancel;
        self
    }

    /// Installs a crash-injection hook (tests; feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    #[must_use]
    pub fn with_fault_hook(mut self, hook: FaultHook) -> Migrator {
        self.faults = Some(hook);
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The migrations.
    pub fn migrations(&self) -> &MigrationSet {
        &self.set
    }

    /// Checks the ledger against the migrations: applied ones unchanged and
    /// present, pending ones after the applied ones. Returns the pending ones up to `to`.
    fn pending<'a>(&'a self, doc: &StateDoc, to: Option<u32>) -> Result<Vec<&'a Migration>> {
        for entry in &doc.applied {
            let Some(m) = self.set.get(entry.id) else {
                return Err(MigrateError::MissingApplied {
                    id: entry.id,
                    name: entry.name.clone(),
                });
            };
            if m.checksum != entry.checksum {
                return Err(MigrateError::ChecksumMismatch {
                    id: m.id,
                    name: m.name.clone(),
                    applied: entry.checksum.clone(),
                    current: m.checksum.clone(),
                });
            }
        }
        let last_applied = doc.applied.iter().map(|e| e.id).max();
        let applied: std::collections::BTreeSet<u32> = doc.applied.iter().map(|e| e.id).collect();
        let mut pending = Vec::new();
        for m in self.set.iter() {
            if applied.contains(&m.id) {
                continue;
            }
            if let Some(last) = last_applied
                && m.id < last
            {
                return Err(MigrateError::OutOfOrder {
                    pending: m.id,
                    applied: last,
                });
            }
            if to.is_none_or(|t| m.id <= t) {
                pending.push(m);
            }
        }
        Ok(pending)
    }

    /// The state of every migration, the kinds and the lock.
    ///
    /// # Errors
    /// A store error, or an inconsistent ledger (edited or missing applied migration).
    pub async fn status(&self) -> Result<Status> {
        let doc = state::load(self.store.as_ref()).await?.doc;
        let now = self
            .store
            .now()
            .await
            .map_err(MigrateError::store("reading the clock"))?;
        let applied: BTreeMap<u32, &LedgerEntry> = doc.applied.iter().map(|e| (e.id, e)).collect();
        let mut migrations: Vec<MigrationStatus> = self
            .set
            .iter()
            .map(|m| MigrationStatus {
                id: m.id,
                name: m.name.clone(),
                applied_at: applied.get(&m.id).map(|e| e.applied_at),
                in_progress: doc.running.as_ref().is_some_and(|r| r.migration == m.id),
            })
            .collect();
        for e in &doc.applied {
            if self.set.get(e.id).is_none() {
                migrations.push(MigrationStatus {
                    id: e.id,
                    name: format!("{} (file missing)", e.name),
                    applied_at: Some(e.applied_at),
                    in_progress: false,
                });
            }
        }
        migrations.sort_by_key(|m| m.id);
        Ok(Status {
            migrations,
            kinds: doc.kinds,
            lease: doc.lease,
            running: doc.running,
            sweep: doc.sweep,
            now,
        })
    }

    /// Validates the ledger against the migrations (the checks `up` does first).
    ///
    /// # Errors
    /// As for [`Migrator::up`] before it writes anything.
    pub async fn validate(&self) -> Result<Vec<u32>> {
        let doc = state::load(self.store.as_ref()).await?.doc;
        Ok(self
            .pending(&doc, None)?
            .into_iter()
            .map(|m| m.id)
            .collect())
    }

    /// Applies pending migrations up to `to` (all when `None`).
    ///
    /// # Errors
    /// See [`MigrateError`]; every error leaves the store resumable.
    pub async fn up(&self, to: Option<u32>) -> Result<UpReport> {
        self.up_on(
            Arc::clone(&self.store),
            to,
            &mut RunMode::Apply,
            &self.lease,
        )
        .await
    }

    /// Runs pending migrations on a dry-run overlay and reports what would change.
    ///
    /// # Errors
    /// As for [`Migrator::up`], except that unsafe statements are reported, not refused.
    pub async fn dry_run(&self, to: Option<u32>, samples_per_kind: usize) -> Result<DryRun> {
        let overlay = OverlayStore::new(Arc::clone(&self.store))
            .await
            .map_err(MigrateError::store("preparing the dry run"))?;
        let overlay = Arc::new(overlay);
        let mut stages = DryStages::default();
        self.up_on(
            Arc::clone(&overlay) as Arc<dyn Store>,
            to,
            &mut RunMode::DryRun(&mut stages),
            &self.lease,
        )
        .await?;
        let mut out = DryRun {
            stages: stages.previews,
            conflicts: stages.conflicts,
            ..DryRun::default()
        };
        let mut per_kind: BTreeMap<String, usize> = BTreeMap::new();
        overlay
            .for_each_change(|key, change| {
                let data_changed = change.before.as_ref().map(|e| &e.value)
                    != change.after.as_ref().map(|e| &e.value);
                if data_changed {
                    out.changed_entities += 1;
                    let n = per_kind.entry(key.kind.clone()).or_default();
                    if *n < samples_per_kind {
                        *n += 1;
                        out.samples.push((key, change));
                    }
                }
            })
            .map_err(MigrateError::store("reading the dry run's changes"))?;
        Ok(out)
    }

    async fn up_on(
        &self,
        store: Arc<dyn Store>,
        to: Option<u32>,
        mode: &mut RunMode<'_>,
        lease_options: &LeaseOptions,
    ) -> Result<UpReport> {
        let doc = state::load(store.as_ref()).await?.doc;
        let pending = self.pending(&doc, to)?;
        if pending.is_empty() {
            if let Some(run) = &doc.running {
                return Err(MigrateError::Dirty(format!(
                    "an interrupted run of migration {} is recorded but that migration is not pending here; \
                     run `tern up` without --to, or restore its file",
                    run.migration
                )));
            }
            let swept_late = self.sweep_late_writes(&store, &doc, mode).await?;
            return Ok(UpReport {
                swept_late,
                ..UpReport::default()
            });
        }
        let lease = Lease::acquire(Arc::clone(&store), lease_options).await?;
        let result = self.run_pending(&store, &lease, &pending, mode).await;
        #[cfg(feature = "fault-injection")]
        if matches!(result, Err(MigrateError::InjectedCrash(_))) {
            // Simulated process death: stop renewing, do not release.
            drop(lease);
            return result;
        }
        if let Err(e) = lease.release().await {
            tracing::warn!(error = %e, "could not release the lease; it expires by itself");
        }
        result
    }

    async fn run_pending(
        &self,
        store: &Arc<dyn Store>,
        lease: &Lease,
        pending: &[&Migration],
        mode: &mut RunMode<'_>,
    ) -> Result<UpReport> {
        let mut report = UpReport::default();
        // A checksum check again under the lease: the ledger may have changed while we waited.
        let doc = lease.snapshot().await;
        let fresh = self.pending(&doc, pending.last().map(|m| m.id))?;
        if let Some(run) = &doc.running {
            match fresh.first() {
                Some(m) if m.id == run.migration && m.checksum != run.checksum => {
                    self.restart_edited(store.as_ref(), lease, run).await?;
                }
                Some(m) if m.id == run.migration => {}
                _ => {
                    return Err(MigrateError::Dirty(format!(
                        "an interrupted run of migration {} is recorded, but the next pending migration is {}; \
                         restore migration {}'s file so it can resume",
                        run.migration,
                        fresh
                            .first()
                            .map_or_else(|| "none".to_owned(), |m| m.id.to_string()),
                        run.migration
                    )));
                }
            }
        }
        for m in fresh {
            if lease.is_lost() {
                return Err(MigrateError::LeaseLost {
                    token: lease.token(),
                });
            }
            let span = tracing::info_span!("migration", id = m.id, name = %m.name);
            let r = if m.lazy {
                crate::lazy::install::install(store.as_ref(), lease, m)
                    .instrument(span)
                    .await?
            } else {
                crate::lazy::install::complete_pending(store, lease, &self.set)
                    .instrument(span.clone())
                    .await?;
                self.run_one(store, lease, m, mode).instrument(span).await?
            };
            report.applied.push(r);
        }
        Ok(report)
    }

    /// Runs migration `m` (from its checkpoint if an interrupted run of it is
    /// recorded): prechecks, its stages, the census, and its ledger entry.
    async fn run_one(
        &self,
        store: &Arc<dyn Store>,
        lease: &Lease,
        m: &Migration,
        mode: &mut RunMode<'_>,
    ) -> Result<MigrationReport> {
        let started = Instant::now();
        // A dry run reports its findings, not its progress.
        let progress: &dyn Progress = if mode.is_dry() {
            &NoProgress
        } else {
            self.progress.as_ref()
        };
        let doc = lease.snapshot().await;
        let plan = plan::plan(m, &doc.kinds);
        let history = plan::history(&self.set, m.id);
        let prechecked = doc.running.is_none();
        let prebuilt = if prechecked {
            self.prechecks(store.as_ref(), m, &plan, mode, progress)
                .await?
        } else {
            None
        };
        let (stage_index, pos, resumed) = self
            .begin_or_resume(store.as_ref(), lease, m, &doc, progress)
            .await?;
        let runner = Runner {
            collect_conflicts: mode.is_dry(),
            prebuilt: std::sync::Mutex::new(prebuilt),
            renames_prechecked: prechecked,
            ..self.runner(store.as_ref(), (m.id, &m.name), lease, progress, &history)
        };
        let mut total = self
            .run_stages(store, &runner, m, &plan, (stage_index, pos), mode)
            .await?;
        // The census: no entity of any written kind may be left below its target.
        total.swept += self.census_and_sweep(&runner, &plan).await?;
        finish_schema(store.as_ref(), m, &plan, progress).await;
        let forced_conflicts = take_conflicts(&runner, mode);
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        record_applied(store.as_ref(), lease, m, &plan, total, duration_ms).await?;
        Ok(MigrationReport {
            id: m.id,
            name: m.name.clone(),
            counts: total,
            resumed,
            duration_ms,
            forced_conflicts,
        })
    }

    /// What is checked before a migration starts (not when it resumes): an unsafe
    /// move/copy (unless forced, and not in a dry run) and a kind rename's target.
    /// A migration whose only move/copy is its first stage is checked in one pass
    /// over the store, and the join index that pass built is returned for the stage.
    async fn prechecks(
        &self,
        store: &dyn Store,
        m: &Migration,
        plan: &Plan,
        mode: &RunMode<'_>,
        progress: &dyn Progress,
    ) -> Result<Option<join::JoinIndex>> {
        let mut prebuilt = None;
        if !mode.is_dry()
            && !self.run.force_unsafe
            && plan
                .stages
                .iter()
                .any(|s| matches!(s, Stage::Transfer { .. }))
        {
            match join::direct_check(plan) {
                Some((t, text)) => {
                    let r = join::Reading {
                        store,
                        page: self.run.batch_size,
                        estimate: self.run.estimate_totals,
                        progress,
                    };
                    prebuilt = Some(join::precheck(r, t, text, self.run.join_memory).await?);
                }
                None => self.safety_precheck(m).await?,
            }
        }
        self.rename_precheck(store, m, plan).await?;
        Ok(prebuilt)
    }

    /// Where `m` starts: at its checkpoint when an interrupted run of it is
    /// recorded (`true`), else at its first stage, recorded as running.
    async fn begin_or_resume(
        &self,
        store: &dyn Store,
        lease: &Lease,
        m: &Migration,
        doc: &StateDoc,
        progress: &dyn Progress,
    ) -> Result<(usize, Position, bool)> {
        if let Some(run) = doc.running.as_ref().filter(|run| run.migration == m.id) {
            progress.note(&format!(
                "resuming migration {} ({}) at stage {} from its checkpoint ({} entities done)",
                m.id,
                m.name,
                run.stage + 1,
                run.counts.processed
            ));
            let pos = Position {
                phase: run.phase,
                cursor: run.cursor.clone(),
                counts: run.counts,
                stage_base: 0,
            };
            return Ok((run.stage, pos, true));
        }
        let now = store
            .now()
            .await
            .map_err(MigrateError::store("reading the clock"))?;
        let checksum = m.checksum.clone();
        let id = m.id;
        lease
            .update(move |doc| {
                doc.running = Some(RunState {
                    migration: id,
                    checksum: checksum.clone(),
                    started_at: now,
                    stage: 0,
                    phase: 0,
                    cursor: None,
                    counts: RunCounts::default(),
                    checkpoints: 0,
                    partitions: None,
                });
            })
            .await?;
        Ok((0, Position::default(), false))
    }

    /// Runs the stages of `plan` from `stage_index` at `pos`, recording each
    /// finished stage under the lease; a dry run collects each stage's counts
    /// in `previews`. Returns the counts of the whole migration.
    async fn run_stages(
        &self,
        store: &Arc<dyn Store>,
        runner: &Runner<'_>,
        m: &Migration,
        plan: &Plan,
        (mut stage_index, mut pos): (usize, Position),
        mode: &mut RunMode<'_>,
    ) -> Result<RunCounts> {
        let mut total = pos.counts;
        if !runner.collect_conflicts {
            crate::telemetry::run_started(m.id, &pos.counts);
        }
        while stage_index < plan.stages.len() {
            let stage = &plan.stages[stage_index];
            // Entities written late (old versions) must catch up before a stage that reads them.
            let swept = total.swept;
            self.catch_up_before(runner, stage, &mut total).await?;
            if total.swept != swept {
                // Late entities changed: the prebuilt index may not describe them.
                runner.prebuilt.lock().ok().and_then(|mut p| p.take());
            }
            let estimate = if self.run.estimate_totals {
                self.estimate(runner.store, stage).await?
            } else {
                None
            };
            runner.progress.stage_started(&StageStart {
                migration: m.id,
                name: &m.name,
                stage: stage_index,
                stages: plan.stages.len(),
                description: &stage.describe(),
                total: estimate,
            });
            if !runner.collect_conflicts {
                crate::telemetry::stage_started(m.id, stage_index, estimate);
            }
            let before = pos.counts;
            pos.stage_base = pos.counts.processed;
            // Fixed-schema stores add the columns the stage writes (idempotent: also on resume).
            runner
                .store
                .prepare_schema(&plan::schema_changes(stage))
                .await
                .map_err(MigrateError::store("preparing the schema for a stage"))?;
            let span = tracing::info_span!(
                "stage",
                stage = stage_index + 1,
                stages = plan.stages.len(),
                description = %stage.describe()
            );
            let doc = runner.held()?.snapshot().await;
            match partitioned::partitioned_kind(
                self,
                store.as_ref(),
                &doc,
                (m.id, stage_index),
                stage,
                mode,
            ) {
                Some(kind) => {
                    self.run_partitioned(store, runner, m, (stage_index, stage, kind), &mut pos)
                        .instrument(span)
                        .await?;
                }
                None => {
                    runner
                        .run_stage(stage_index, stage, &mut pos)
                        .instrument(span)
                        .await?;
                }
            }
            runner.progress.stage_finished(&pos.counts);
            if let Some(dry) = mode.collector() {
                let mut stage_counts = pos.counts;
                stage_counts.processed -= before.processed;
                stage_counts.changed -= before.changed;
                stage_counts.conflicts -= before.conflicts;
                stage_counts.skipped -= before.skipped;
                stage_counts.unmatched_sources -= before.unmatched_sources;
                dry.previews.push(StagePreview {
                    migration: m.id,
                    description: stage.describe(),
                    counts: stage_counts,
                });
            }
            stage_index += 1;
            total = pos.counts;
            pos = Position {
                phase: 0,
                cursor: None,
                counts: pos.counts,
                stage_base: 0,
            };
            if stage_index < plan.stages.len() {
                let counts = pos.counts;
                runner
                    .held()?
                    .update(move |doc| {
                        if let Some(run) = doc.running.as_mut() {
                            run.stage = stage_index;
                            run.phase = 0;
                            run.cursor = None;
                            run.counts = counts;
                            run.partitions = None;
                        }
                    })
                    .await?;
            }
        }
        Ok(total)
    }

    /// Runs the migration on a dry-run overlay and refuses it if a move/copy is unsafe.
    async fn safety_precheck(&self, m: &Migration) -> Result<()> {
        let overlay = Arc::new(
            OverlayStore::new(Arc::clone(&self.store))
                .await
                .map_err(MigrateError::store("preparing the safety check"))?,
        );
        let checker = Migrator {
            store: Arc::clone(&overlay) as Arc<dyn Store>,
            set: self.set.clone(),
            run: RunOptions {
                estimate_totals: false,
                max_rate: None,
                ..self.run.clone()
            },
            lease: LeaseOptions {
                wait: None,
                renew: true,
                ..self.lease.clone()
            },
            progress: Arc::new(NoProgress),
            cancel: self.cancel.clone(),
            #[cfg(feature = "fault-injection")]
            faults: None,
        };
        let mut stages = DryStages::default();
        // The overlay copies the state, including our own lease: run without re-taking it.
        let store: Arc<dyn Store> = overlay;
        let mut doc = state::load(store.as_ref()).await?;
        doc.doc.lease = None;
        state::store_if(store.as_ref(), doc.revision, &doc.doc).await?;
        let lease = Lease::acquire(Arc::clone(&store), &checker.lease).await?;
        let mut mode = RunMode::DryRun(&mut stages);
        let r = Box::pin(checker.run_one(&store, &lease, m, &mut mode)).await;
        let _ = lease.release().await;
        r?;
        match crate::migration::conflict::refusal(&stages.conflicts) {
            None => Ok(()),
            Some(refused) => Err(refused),
        }
    }

    /// Before a migration's first run records anything: every kind rename it
    /// plans can run on this store, and its new name is unused (unless an
    /// earlier rename of the same migration empties or fills it; the stage
    /// checks again when it starts). A refusal here leaves no interrupted run
    /// behind, so the migration can still be edited.
    async fn rename_precheck(&self, store: &dyn Store, m: &Migration, plan: &Plan) -> Result<()> {
        let mut touched: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for r in &plan.renames {
            let target_empty = !touched.contains(r.to.as_str());
            rename::check_rename(store, m.id, &m.name, &r.from, &r.to, target_empty).await?;
            touched.insert(&r.from);
            touched.insert(&r.to);
        }
        Ok(())
    }

    /// Entities of the kinds a stage reads or writes that are below the version
    /// the stage expects (written late by old application code) are brought forward first.
    async fn catch_up_before(
        &self,
        runner: &Runner<'_>,
        stage: &Stage,
        total: &mut RunCounts,
    ) -> Result<()> {
        let needs: Vec<(String, Version)> = match stage {
            Stage::Local { kind, from, .. } => vec![(kind.clone(), *from)],
            Stage::Transfer {
                transfer,
                target_from,
                source_version,
                ..
            } => {
                vec![
                    (transfer.to_kind.clone(), *target_from),
                    (transfer.prop.kind.clone(), *source_version),
                ]
            }
            Stage::RenameKind { .. } => vec![],
            Stage::Build { sources, .. } => sources.clone(),
        };
        for (kind, version) in needs {
            if version == 0 {
                continue;
            }
            total.swept += self.sweep_below(runner, &kind, version).await?;
        }
        Ok(())
    }

    /// Brings every entity of `kind` below `target` forward to `target`. Returns how many.
    async fn sweep_below(&self, runner: &Runner<'_>, kind: &str, target: Version) -> Result<u64> {
        let mut swept = 0u64;
        let below = Filter {
            version: VersionFilter::Below(target),
            conditions: vec![],
        };
        let mut pages = std::pin::pin!(scan_pages(runner.store, kind, below, self.run.batch_size));
        while let Some(page) = pages.try_next().await.map_err(MigrateError::store(
            "scanning for entities below their version",
        ))? {
            for e in &page.entities {
                let mut current = e.clone();
                for _ in 0..=self.run.max_retries {
                    let (new, _) = runner.bring_forward(&current, target).await?;
                    let out = runner
                        .store
                        .write_checked(vec![crate::store::Write::Replace {
                            expected: current.clone(),
                            new,
                        }])
                        .await
                        .map_err(MigrateError::store("writing a swept entity"))?;
                    if out.first() == Some(&crate::store::WriteOutcome::Applied) {
                        swept += 1;
                        break;
                    }
                    match runner
                        .store
                        .get(&current.key)
                        .await
                        .map_err(MigrateError::store("re-reading an entity"))?
                    {
                        Some(again) if again.version < target => current = again,
                        _ => break,
                    }
                }
            }
        }
        if swept > 0 {
            runner.progress.note(&format!(
                "{swept} entities of {kind} were below version {target} and were brought forward"
            ));
        }
        Ok(swept)
    }

    /// Proves that no entity of the migration's kinds is below its target, sweeping late ones.
    /// First, that no entity is left under a renamed kind's old name (moving
    /// what old application code wrote there during later stages).
    async fn census_and_sweep(&self, runner: &Runner<'_>, plan: &Plan) -> Result<u64> {
        let mut swept = 0u64;
        // A rename that is the migration's last stage has just proved, in its
        // own census, that nothing is left under its old name: no later stage
        // ran meanwhile, so another full pass would only repeat that proof.
        let proven = runner
            .rename_proven
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let proven_last = match (plan.stages.last(), proven) {
            (Some(Stage::RenameKind { from, to }), Some(p)) => {
                (*from == p.0 && *to == p.1).then_some(p)
            }
            _ => None,
        };
        for rename in &plan.renames {
            if proven_last
                .as_ref()
                .is_some_and(|(f, t)| *f == rename.from && *t == rename.to)
            {
                continue;
            }
            let mut pos = Position::default();
            runner
                .rename_census(None, &rename.from, &rename.to, &mut pos)
                .await?;
            swept += pos.counts.swept;
        }
        for (kind, &target) in &plan.targets {
            let mut passes = 0u32;
            loop {
                let below = count_below(
                    runner.store,
                    kind,
                    target,
                    "counting entities below their target (census)",
                )
                .await?;
                if below == 0 {
                    break;
                }
                if passes >= self.run.census_passes {
                    return Err(MigrateError::CensusFailed {
                        kind: kind.clone(),
                        target,
                        count: below,
                        passes,
                    });
                }
                passes += 1;
                runner.progress.note(&format!(
                    "census: {below} entities of {kind} below version {target}; sweep {passes}"
                ));
                swept += self.sweep_below(runner, kind, target).await?;
            }
        }
        Ok(swept)
    }

    /// The progress display's estimate of a stage's entities: the store's
    /// cheap count of each kind the stage reads (an upper bound: it ignores
    /// versions), or `None` when the store keeps no such figure. Never a scan.
    async fn estimate(&self, store: &dyn Store, stage: &Stage) -> Result<Option<u64>> {
        let kinds: Vec<&str> = match stage {
            Stage::Local { kind, .. } => vec![kind.as_str()],
            Stage::Transfer {
                transfer, is_move, ..
            } => {
                let mut k = vec![transfer.to_kind.as_str()];
                if *is_move {
                    k.push(transfer.prop.kind.as_str());
                }
                k
            }
            Stage::RenameKind { from, .. } => vec![from.as_str()],
            Stage::Build { sources, .. } => sources.iter().map(|(k, _)| k.as_str()).collect(),
        };
        let mut total = 0;
        for kind in kinds {
            match store
                .estimate_count(kind)
                .await
                .map_err(MigrateError::store("estimating the entities to migrate"))?
            {
                Some(n) => total += n,
                None => return Ok(None),
            }
        }
        Ok(Some(total))
    }

    /// Counts the entities of every kind by version (the census of `tern verify`),
    /// and each kind's expected version.
    ///
    /// # Errors
    /// A store error.
    pub async fn census(&self) -> Result<Vec<KindCensus>> {
        let doc = state::load(self.store.as_ref()).await?.doc;
        let mut kinds: Vec<String> = self
            .store
            .kinds()
            .await
            .map_err(MigrateError::store("listing kinds"))?;
        for k in doc.kinds.keys() {
            if !kinds.contains(k) {
                kinds.push(k.clone());
            }
        }
        kinds.sort();
        let mut out = Vec::new();
        for kind in kinds {
            let versions = self
                .store
                .version_census(&kind)
                .await
                .map_err(MigrateError::store("counting entities by version"))?;
            out.push(KindCensus {
                expected: doc.kinds.get(&kind).copied().unwrap_or(0),
                kind,
                versions,
            });
        }
        Ok(out)
    }

    /// A runner of `migration` (its id and name) with this migrator's options:
    /// collecting no conflicts, nothing prebuilt, started now.
    fn runner<'a>(
        &'a self,
        store: &'a dyn Store,
        ids: (u32, &'a str),
        lease: &'a Lease,
        progress: &'a dyn Progress,
        history: &'a BTreeMap<String, Vec<plan::Step>>,
    ) -> Runner<'a> {
        Runner {
            lease: Some(lease),
            pace: crate::migration::pace::RateLimiter::new(self.run.max_rate),
            ..self.unleased_runner(store, ids, progress, history)
        }
    }

    /// A runner as [`Migrator::runner`] makes it, with no lease and no pace
    /// (a partition's worker sets its lease, partition and share of the rate).
    fn unleased_runner<'a>(
        &'a self,
        store: &'a dyn Store,
        (migration, migration_name): (u32, &'a str),
        progress: &'a dyn Progress,
        history: &'a BTreeMap<String, Vec<plan::Step>>,
    ) -> Runner<'a> {
        Runner {
            store,
            migration,
            migration_name,
            lease: None,
            part: None,
            options: &self.run,
            progress,
            cancel: &self.cancel,
            #[cfg(feature = "fault-injection")]
            faults: self.faults.as_ref(),
            history,
            conflicts: std::sync::Mutex::new(Vec::new()),
            collect_conflicts: false,
            pace: None,
            unmatched: std::sync::atomic::AtomicU64::new(0),
            prebuilt: std::sync::Mutex::new(None),
            renames_prechecked: false,
            rename_proven: std::sync::Mutex::new(None),
        }
    }
}

/// The census of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCensus {
    /// The kind.
    pub kind: String,
    /// The version all its entities should be at.
    pub expected: Version,
    /// Entities per version.
    pub versions: BTreeMap<Version, u64>,
}

impl KindCensus {
    /// Entities below the expected version.
    pub fn behind(&self) -> u64 {
        self.versions.range(..self.expected).map(|(_, n)| n).sum()
    }
}

/// What a dry run collects: each stage's counts and every conflict.
#[derive(Debug, Default)]
struct DryStages {
    previews: Vec<StagePreview>,
    conflicts: Vec<crate::migration::conflict::Conflict>,
}

/// How a run treats its store.
#[derive(Debug)]
enum RunMode<'d> {
    /// Apply the migrations: progress is reported, an unsafe move/copy is refused
    /// before it starts (unless forced), late writes are swept, and the conflicts a
    /// forced move/copy met are reported with its migration.
    Apply,
    /// A dry run on an overlay: no progress, no safety precheck, late writes only
    /// counted; each stage's counts and every conflict go to the collector.
    DryRun(&'d mut DryStages),
}

impl RunMode<'_> {
    fn is_dry(&self) -> bool {
        matches!(self, RunMode::DryRun(_))
    }

    /// The dry run's collector (none when applying).
    fn collector(&mut self) -> Option<&mut DryStages> {
        match self {
            RunMode::Apply => None,
            RunMode::DryRun(stages) => Some(stages),
        }
    }
}

/// The conflicts `runner` collected, deduplicated: into the dry run's collector,
/// or (applying) returned as the forced conflicts of the migration.
fn take_conflicts(
    runner: &Runner<'_>,
    mode: &mut RunMode<'_>,
) -> Vec<crate::migration::conflict::Conflict> {
    let mut forced_conflicts = Vec::new();
    if let Ok(mut c) = runner.conflicts.lock() {
        match mode.collector() {
            Some(dry) => {
                dry.conflicts.append(&mut c);
                crate::migration::conflict::dedup(&mut dry.conflicts);
            }
            None => {
                forced_conflicts.append(&mut c);
                crate::migration::conflict::dedup(&mut forced_conflicts);
            }
        }
    }
    forced_conflicts
}

/// Every entity is at its target: a fixed-schema store may drop emptied columns. The data
/// migration is complete either way, so a failure here is a warning, not an error.
async fn finish_schema(store: &dyn Store, m: &Migration, plan: &Plan, progress: &dyn Progress) {
    let changes: Vec<_> = plan.stages.iter().flat_map(plan::schema_changes).collect();
    if let Err(e) = store.finish_schema(&changes).await {
        // The error and its cause (the driver's text), as the CLI prints errors.
        let text = std::iter::successors(Some(&e as &dyn std::error::Error), |c| c.source())
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(": ");
        tracing::warn!(migration = m.id, error = %text, "could not finish the schema change (emptied columns stay)");
        progress.note(&format!(
            "migration {}: emptied columns were not dropped: {text}",
            m.id
        ));
    }
}

/// How many entities of `kind` are below `version` (`step` names the count
/// in an error).
async fn count_below(
    store: &dyn Store,
    kind: &str,
    version: Version,
    step: &'static str,
) -> Result<u64> {
    store
        .count(
            kind,
            Filter {
                version: VersionFilter::Below(version),
                conditions: vec![],
            },
        )
        .await
        .map_err(MigrateError::store(step))
}

/// Records `m` as applied in the ledger, with every kind's version after it (a renamed
/// kind's under its new name), and clears the running state, under the lease.
async fn record_applied(
    store: &dyn Store,
    lease: &Lease,
    m: &Migration,
    plan: &Plan,
    counts: RunCounts,
    duration_ms: u64,
) -> Result<()> {
    let applied_at = store
        .now()
        .await
        .map_err(MigrateError::store("reading the clock"))?;
    let entry = ledger_entry(m, plan, applied_at, duration_ms, counts);
    let kinds_after = plan.kinds_after.clone();
    lease
        .update(move |doc| {
            doc.applied.push(entry.clone());
            doc.kinds = kinds_after.clone();
            doc.running = None;
        })
        .await
}
