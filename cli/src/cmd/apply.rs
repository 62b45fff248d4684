//! `tern plan` and `tern up`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tern_core::migrate::{DryRun, LeaseOptions, RunOptions, UpReport};
use tern_core::model::json::entity_to_json_line;

use crate::opt::{RunArgs, UpArgs, WorkerArgs};
use crate::{Ctx, EXIT_OK};

/// `tern plan`: a dry run of the pending migrations.
///
/// Exits 5 (as `check` and `up` do) when a move/copy is unsafe.
///
/// # Errors
/// As `tern up` before it writes; unsafe statements are reported, not refused.
pub async fn plan(ctx: &Ctx, run: &RunArgs, samples: usize) -> anyhow::Result<u8> {
    let set = ctx.migrations()?;
    let lazy = lazy_ids(&set);
    let store = ctx.store().await?;
    let migrator = ctx.migrator(store, set, run);
    let pending = migrator.validate().await?;
    let dry = migrator.dry_run(run.to, samples).await?;
    let lazy: Vec<u32> = lazy
        .into_iter()
        .filter(|id| pending.contains(id) && run.to.is_none_or(|to| *id <= to))
        .collect();
    print_dry_run(ctx, &dry, &lazy);
    // The same verdict as `tern check` and `tern up`: unsafe is exit 5.
    Ok(if dry.conflicts.is_empty() {
        EXIT_OK
    } else {
        crate::EXIT_UNSAFE
    })
}

/// Prints, indented, the first `most` of `conflicts` that `statement` wrote.
fn print_examples(
    conflicts: &[tern_core::migrate::conflict::Conflict],
    statement: &str,
    most: usize,
) {
    for c in conflicts
        .iter()
        .filter(|c| c.statement == statement)
        .take(most)
    {
        crate::outln!("    {c}");
    }
}

/// The ids of the lazy migrations of `set`.
fn lazy_ids(set: &tern_core::migrate::MigrationSet) -> Vec<u32> {
    set.iter().filter(|m| m.lazy).map(|m| m.id).collect()
}

fn print_dry_run(ctx: &Ctx, dry: &DryRun, lazy: &[u32]) {
    if ctx.opt.json {
        let stages: Vec<serde_json::Value> = dry
            .stages
            .iter()
            .map(|s| {
                serde_json::json!({"migration": s.migration, "stage": s.description,
                    "processed": s.counts.processed, "changed": s.counts.changed,
                    "unmatched_sources": s.counts.unmatched_sources})
            })
            .collect();
        let samples: Vec<serde_json::Value> = dry
            .samples
            .iter()
            .map(|(key, c)| {
                serde_json::json!({"key": key.to_string(),
                    "before": c.before.as_ref().map(entity_to_json_line),
                    "after": c.after.as_ref().map(entity_to_json_line)})
            })
            .collect();
        crate::outln!(
            "{}",
            serde_json::json!({"dry_run": true, "stages": stages, "lazy": lazy, "changed_entities": dry.changed_entities,
                "samples": samples, "unsafe_conflicts": dry.conflicts, "safe": dry.conflicts.is_empty()})
        );
        return;
    }
    for id in lazy {
        crate::outln!("  {id:04} {}", crate::cmd::project::LAZY_NOTE);
    }
    if dry.stages.is_empty() {
        crate::outln!(
            "nothing to do: no pending migration changes an entity (lazy ones are installed without touching any)"
        );
        return;
    }
    crate::outln!("dry run: nothing was written");
    for s in &dry.stages {
        crate::outln!(
            "  {:04} {:<60} {:>9} entities, {:>9} would change{}",
            s.migration,
            s.description,
            s.counts.processed,
            s.counts.changed,
            if s.counts.unmatched_sources > 0 {
                format!(
                    ", {} move sources match no target (kept)",
                    s.counts.unmatched_sources
                )
            } else {
                String::new()
            }
        );
    }
    crate::outln!("{} entities would change", dry.changed_entities);
    for (key, c) in &dry.samples {
        crate::outln!("  {key}");
        crate::outln!(
            "    before: {}",
            c.before
                .as_ref()
                .map_or_else(|| "(absent)".to_owned(), entity_to_json_line)
        );
        crate::outln!(
            "    after:  {}",
            c.after
                .as_ref()
                .map_or_else(|| "(deleted)".to_owned(), entity_to_json_line)
        );
    }
    if dry.conflicts.is_empty() {
        crate::outln!("safety: every move/copy target gets at most one value");
    } else {
        crate::outln!(
            "UNSAFE: {} target(s) written by sources with different values; `tern up` refuses this:",
            dry.conflicts.len()
        );
        for (statement, n) in tern_core::migrate::conflict::per_statement(&dry.conflicts) {
            crate::outln!("  `{statement}`: {n} target(s), e.g.");
            print_examples(&dry.conflicts, &statement, 10);
        }
    }
}

/// `tern up`.
///
/// # Errors
/// See the exit codes: lock held (3), checksum mismatch (4), unsafe (5), interrupted (130).
pub async fn up(ctx: &Ctx, args: &UpArgs) -> anyhow::Result<u8> {
    if args.dry_run {
        return plan(ctx, &args.run, 3).await;
    }
    let set = ctx.migrations()?;
    let lazy = lazy_ids(&set);
    let store = ctx
        .store_waiting(args.wait.map(Duration::from_secs))
        .await?;
    let state_store = Arc::clone(&store);
    let migrator = ctx
        .migrator(store, set, &args.run)
        .with_lease_options(LeaseOptions {
            ttl: ctx.settings.lease_ttl,
            wait: args.wait.map(Duration::from_secs),
            renew: true,
        });
    let migrator = migrator.with_run_options(RunOptions {
        force_unsafe: args.force_unsafe,
        ..ctx.run_options(&args.run)
    });
    let report = migrator.up(args.run.to).await.map_err(|e| {
        // A store that failed mid-run (a dropped connection, a restart): the
        // last checkpoint holds and nothing is half-written.
        let resumable = matches!(e, tern_core::migrate::MigrateError::Store { .. });
        let e = anyhow::Error::from(e);
        if resumable {
            e.context("tern up stopped on a store error; progress is checkpointed: run `tern up` again to resume")
        } else {
            e
        }
    })?;
    let pending = if report.swept_late.is_empty() {
        BTreeSet::new()
    } else {
        lazy_pending_kinds(state_store.as_ref()).await?
    };
    print_up(ctx, &report, &lazy, &pending);
    Ok(EXIT_OK)
}

/// The kinds of lazy migrations installed and not yet recorded complete: their
/// entities below the kind's version are stale under that migration, not
/// written late by old code.
async fn lazy_pending_kinds(
    store: &dyn tern_core::store::Store,
) -> anyhow::Result<BTreeSet<String>> {
    let state = tern_core::migrate::state::load(store).await?;
    Ok(state
        .doc
        .lazy
        .iter()
        .filter(|r| r.completed_at.is_none())
        .flat_map(|r| r.kinds.keys().cloned())
        .collect())
}

/// `tern worker`: claims partitions of a running partitioned stage, and runs
/// `tern up` itself when no runner holds the lock; then joins a partitioned
/// `tern sweep` in progress, if any; returns once no migration is pending
/// and no sweep runs (docs/workers.md).
///
/// # Errors
/// As `tern up`.
pub async fn worker(ctx: &Ctx, args: &WorkerArgs) -> anyhow::Result<u8> {
    let set = ctx.migrations()?;
    let lazy = lazy_ids(&set);
    let code = tern_core::lazy::install::code_migrations(&set);
    let store = ctx.store().await?;
    let migrator = ctx
        .migrator(Arc::clone(&store), set, &args.run)
        .with_lease_options(LeaseOptions {
            ttl: ctx.settings.lease_ttl,
            wait: None,
            renew: true,
        });
    let report = migrator.work().await?;
    if let Some(up) = &report.up {
        print_up(ctx, up, &lazy, &BTreeSet::new());
    }
    let run = ctx.run_options(&args.run);
    let sweep_options = tern_core::lazy::SweepOptions {
        batch_size: run.batch_size,
        max_rate: run.max_rate,
        cancel: ctx.cancel.clone(),
        workers: run.workers,
        ..tern_core::lazy::SweepOptions::default()
    };
    let swept = join_sweep(ctx, &store, &code, &sweep_options, args.wait_for_sweep).await?;
    let (partitions, lost) = (
        report.partitions + swept.partitions,
        report.lost + swept.lost,
    );
    if ctx.opt.json {
        crate::outln!(
            "{}",
            serde_json::json!({"worker": {"partitions": partitions, "lost": lost, "ran_up": report.up.is_some(),
                "sweep_partitions": swept.partitions}})
        );
    } else {
        crate::outln!(
            "worker done: {partitions} partitions run here{}{}; nothing is pending",
            if swept.partitions > 0 {
                format!(" ({} of a sweep)", swept.partitions)
            } else {
                String::new()
            },
            if lost > 0 {
                format!(", {lost} lost to other workers")
            } else {
                String::new()
            }
        );
    }
    Ok(EXIT_OK)
}

/// `tern worker`'s part in a partitioned sweep: joins the one running, or
/// waits up to `wait_secs` for one to start, polling, and joins it; returns
/// when the sweep it joined ends, or when none came.
async fn join_sweep(
    ctx: &Ctx,
    store: &Arc<dyn tern_core::store::Store>,
    code: &std::collections::BTreeMap<u32, tern_core::migrate::Migration>,
    options: &tern_core::lazy::SweepOptions,
    wait_secs: u64,
) -> anyhow::Result<tern_core::lazy::sweep::JoinReport> {
    // Past what the clock can hold (a wait of centuries): no deadline.
    let deadline = std::time::Instant::now().checked_add(std::time::Duration::from_secs(wait_secs));
    loop {
        let swept =
            tern_core::lazy::sweep::join(store, code, options, ctx.settings.lease_ttl).await?;
        let waited = deadline.is_some_and(|d| std::time::Instant::now() >= d);
        if swept.partitions + swept.lost > 0 || waited {
            return Ok(swept);
        }
        tokio::select! {
            () = ctx.cancel.cancelled() => return Err(tern_core::lazy::LazyError::Interrupted.into()),
            () = tokio::time::sleep(SWEEP_POLL) => {}
        }
    }
}

/// How often a waiting `tern worker` looks for a sweep to join.
const SWEEP_POLL: std::time::Duration = std::time::Duration::from_millis(250);

fn print_up(ctx: &Ctx, report: &UpReport, lazy: &[u32], lazy_pending: &BTreeSet<String>) {
    if ctx.opt.json {
        let applied: Vec<serde_json::Value> = report
            .applied
            .iter()
            .map(|m| {
                serde_json::json!({"id": m.id, "name": m.name, "lazy": lazy.contains(&m.id), "resumed": m.resumed, "duration_ms": m.duration_ms,
                    "processed": m.counts.processed, "changed": m.counts.changed, "conflicts": m.counts.conflicts,
                    "skipped": m.counts.skipped, "swept": m.counts.swept,
                    "unmatched_sources": m.counts.unmatched_sources,
                    "forced_conflicts": m.forced_conflicts})
            })
            .collect();
        let late: serde_json::Map<String, serde_json::Value> = report
            .swept_late
            .iter()
            .map(|(k, n)| (k.clone(), serde_json::json!(n)))
            .collect();
        crate::outln!(
            "{}",
            serde_json::json!({"applied": applied, "swept_late": late})
        );
        return;
    }
    for (kind, n) in &report.swept_late {
        if lazy_pending.contains(kind) {
            crate::outln!(
                "{n} entities of {kind} were stale under its pending lazy migration and were brought forward (`tern sweep` records the migration complete)"
            );
        } else {
            crate::outln!(
                "{n} entities of {kind} were below the kind's version (written late by old code) and were brought forward"
            );
        }
    }
    if report.applied.is_empty() {
        crate::outln!("up to date: no pending migrations");
        return;
    }
    for m in &report.applied {
        if lazy.contains(&m.id) {
            crate::outln!(
                "installed {:04}_{} (lazy: no entity touched; clients migrate entities on access, `tern sweep` completes it)",
                m.id,
                m.name
            );
            continue;
        }
        crate::outln!(
            "applied {:04}_{}{}: {} entities processed, {} changed, {} conflicts retried, {} late entities swept ({} ms)",
            m.id,
            m.name,
            if m.resumed { " (resumed)" } else { "" },
            m.counts.processed,
            m.counts.changed,
            m.counts.conflicts,
            m.counts.swept,
            m.duration_ms
        );
        for (statement, n) in tern_core::migrate::conflict::per_statement(&m.forced_conflicts) {
            crate::outln!(
                "  --force-unsafe: `{statement}` wrote {n} target(s) whose sources disagree (the greatest source key won):"
            );
            print_examples(&m.forced_conflicts, &statement, 20);
        }
        if m.counts.unmatched_sources > 0 {
            crate::outln!(
                "  {} move source(s) matched no target and kept their property",
                m.counts.unmatched_sources
            );
        }
    }
}
