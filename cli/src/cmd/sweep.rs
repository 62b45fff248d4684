//! `tern sweep` (complete lazy migrations), `tern gc` (retire a completed
//! lazy migration's spec) and the lazy part of `tern status`.

use std::sync::Arc;

use clap::Args;
use tern_core::lazy::install::code_migrations;
use tern_core::lazy::{self, KindLazyStatus, SweepOptions};
use tern_core::migrate::{Lease, LeaseOptions};

use crate::{Ctx, EXIT_BEHIND, EXIT_OK};

/// `tern status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Count the stale entities of kinds with a pending lazy migration exactly
    /// (a scan of each); by default only the store's cheap figures are shown.
    #[arg(long)]
    pub exact: bool,
}

/// `tern sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// The kinds to sweep (default: every kind with a pending lazy migration).
    pub kinds: Vec<String>,
    /// Entities per batch and checkpoint.
    #[arg(long, value_name = "N", value_parser = crate::opt::at_least_one)]
    pub batch_size: Option<usize>,
    /// The most entities one server-side call takes (default 100; larger
    /// sweeps faster and slows the applications more while it runs).
    #[arg(long, value_name = "N", value_parser = crate::opt::at_least_one)]
    pub call_size: Option<usize>,
    /// At most this many entities per second (a burst of at most one second's worth).
    #[arg(long, value_name = "PER_SECOND", value_parser = crate::opt::positive_rate)]
    pub max_rate: Option<f64>,
    /// Wait up to this many seconds for a lock held by another runner (or, on
    /// the embedded store, for another process to close the store).
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
    pub wait: Option<u64>,
    /// Sweep this many partitions of a kind at once in this process (stores
    /// with partitions); 1 (the default): one scan per kind. A killed sweep's
    /// partitions resume from their checkpoints. See docs/workers.md.
    #[arg(long, value_name = "N", value_parser = crate::opt::at_least_one)]
    pub workers: Option<usize>,
    /// Split each kind's sweep into this many partitions (default: 4 per worker).
    #[arg(long, value_name = "P", value_parser = crate::opt::at_least_one)]
    pub partitions: Option<usize>,
}

/// `tern gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// The lazy migrations whose specs to retire, by number (default: every
    /// completed one). Named `ids`, not `migrations`: that is the global
    /// `--migrations DIR`, and one name for both made clap panic (`tern gc 1`).
    #[arg(value_name = "MIGRATION")]
    pub ids: Vec<u32>,
}

fn lease_options(ctx: &Ctx, wait: Option<u64>) -> LeaseOptions {
    LeaseOptions {
        ttl: ctx.settings.lease_ttl,
        wait: wait.map(std::time::Duration::from_secs),
        ..LeaseOptions::default()
    }
}

/// `tern sweep [KIND...]`: migrates the entities still stale under pending lazy
/// migrations in checkpointed batches while clients keep working (resumes an
/// interrupted sweep); records each lazy migration complete once the census
/// finds none below it. Exit 1 when entities are still stale.
///
/// # Errors
/// The lock is held; store errors.
pub async fn sweep(ctx: &Ctx, args: &SweepArgs) -> anyhow::Result<u8> {
    let store = ctx
        .store_waiting(args.wait.map(std::time::Duration::from_secs))
        .await?;
    // An installed migration's file edited since: refused as `tern up` refuses it (exit 4).
    let code = match ctx.migrations() {
        Ok(set) => {
            let code = code_migrations(&set);
            ctx.migrator(Arc::clone(&store), set, &crate::opt::RunArgs::default())
                .validate()
                .await?;
            code
        }
        Err(_) => Default::default(),
    };
    refuse_unknown_kinds(store.as_ref(), &args.kinds).await?;
    let options = SweepOptions {
        kinds: args.kinds.clone(),
        batch_size: args.batch_size.unwrap_or(ctx.settings.batch_size).max(1),
        max_rate: args.max_rate.or(ctx.settings.max_rate).filter(|r| *r > 0.0),
        call_size: args.call_size.unwrap_or(lazy::sweep::IN_STORE_LIMIT).max(1),
        cancel: ctx.cancel.clone(),
        workers: args.workers.unwrap_or(1),
        partitions: args.partitions,
        ..SweepOptions::default()
    };
    let report = lazy::sweep::sweep(store, &lease_options(ctx, args.wait), &code, &options).await?;
    if ctx.opt.json {
        crate::outln!(
            "{}",
            serde_json::json!({"migrated": report.migrated, "stale": report.stale,
                "completed": report.completed, "resumed": report.resumed})
        );
    } else {
        if report.migrated.is_empty() {
            crate::outln!("no lazy migration is pending");
        }
        for (kind, n) in &report.migrated {
            let stale = report.stale.get(kind).copied().unwrap_or(0);
            crate::outln!("  {kind:<30} {n} migrated, {stale} still stale");
        }
        for id in &report.completed {
            crate::outln!("lazy migration {id} complete");
        }
    }
    Ok(if report.remaining() > 0 {
        EXIT_BEHIND
    } else {
        EXIT_OK
    })
}

/// `tern sweep KIND...` naming a kind with no pending lazy migration is an
/// error naming the kinds that have one (it said "no lazy migration is
/// pending", exit 0, with every entity of the meant kind stale).
async fn refuse_unknown_kinds(
    store: &dyn tern_core::store::Store,
    kinds: &[String],
) -> anyhow::Result<()> {
    if kinds.is_empty() {
        return Ok(());
    }
    let status = lazy::status(store, false).await?;
    let pending: Vec<&str> = status
        .iter()
        .filter(|k| !k.complete)
        .map(|k| k.kind.as_str())
        .collect();
    for kind in kinds {
        if pending.contains(&kind.as_str()) {
            continue;
        }
        let why = if let Some(r) =
            lazy::renamed_away(&tern_core::migrate::state::load(store).await?.doc)
                .into_iter()
                .find(|r| &r.former == kind)
        {
            format!("it was renamed to {} (sweep {})", r.now, r.now)
        } else if status.iter().any(|k| &k.kind == kind) {
            "its lazy migrations are complete".to_owned()
        } else {
            "the store has no such kind".to_owned()
        };
        let listed = if pending.is_empty() {
            "no kind has one".to_owned()
        } else {
            format!("kinds with one: {}", pending.join(", "))
        };
        anyhow::bail!("kind {kind} has no pending lazy migration: {why}; {listed}");
    }
    Ok(())
}

/// `tern gc [N...]`: retires the specs of completed lazy migrations; refused
/// while any entity is still below one.
///
/// # Errors
/// A migration not complete (run `tern sweep`), the lock is held, store errors.
pub async fn gc(ctx: &Ctx, args: &GcArgs) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let lease = Lease::acquire(Arc::clone(&store), &lease_options(ctx, None)).await?;
    let doc = lease.snapshot().await;
    let ids: Vec<u32> = if args.ids.is_empty() {
        doc.lazy
            .iter()
            .filter(|r| r.completed_at.is_some() && r.retired_at.is_none())
            .map(|r| r.migration)
            .collect()
    } else {
        args.ids.clone()
    };
    let mut result = Ok(());
    for id in &ids {
        match lazy::retire(store.as_ref(), &lease, *id).await {
            Ok(true) => crate::outln!("lazy migration {id}: spec retired"),
            Ok(false) => crate::outln!("lazy migration {id}: already retired"),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = lease.release().await {
        tracing::warn!(error = %e, "could not release the lease; it expires by itself");
    }
    result?;
    if ids.is_empty() {
        crate::outln!("nothing to retire");
    }
    Ok(EXIT_OK)
}

/// The per-kind lazy status as JSON.
pub fn lazy_json(st: &[KindLazyStatus]) -> serde_json::Value {
    serde_json::to_value(st).unwrap_or_default()
}

/// Prints the per-kind lazy status (kinds with a lazy migration only).
pub fn print_lazy(st: &[KindLazyStatus]) {
    let shown: Vec<&KindLazyStatus> = st
        .iter()
        .filter(|k| !k.pending.is_empty() || !k.former_names.is_empty())
        .collect();
    if shown.is_empty() {
        return;
    }
    crate::outln!("lazy migrations pending:");
    for k in shown {
        let stale = match (k.stale, k.exact) {
            (Some(n), true) => format!("{n} stale"),
            (Some(n), false) => format!("~{n} stale"),
            (None, _) => "stale: unknown (--exact counts)".to_owned(),
        };
        let former = if k.former_names.is_empty() {
            String::new()
        } else {
            format!(", also under {}", k.former_names.join(", "))
        };
        crate::outln!(
            "  {:<30} v{} lazy {:?}, {stale}{former}; `tern sweep {}` completes it",
            k.kind,
            k.version,
            k.pending,
            k.kind
        );
    }
}
