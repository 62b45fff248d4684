//! `tern status`, `tern verify`, `tern lock`.

use tern_core::migrate::lease::release_stale;
use tern_core::migrate::state;
use tern_core::store::StoreExt;

use crate::opt::{LockArgs, RunArgs};
use crate::{Ctx, EXIT_BEHIND, EXIT_OK};

/// `tern status`.
///
/// # Errors
/// A store error or an inconsistent migrations folder.
pub async fn status(ctx: &Ctx, exact: bool) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    // A migration that does not load (e.g. `tern new`'s comment-only file) is
    // a problem to show, not a reason to show nothing.
    let (set, load_problem) = match ctx.migrations() {
        Ok(set) => (set, None),
        Err(e) => (Default::default(), Some(crate::render_error(&e))),
    };
    let lazy = tern_core::lazy::status(store.as_ref(), exact).await?;
    let migrator = ctx.migrator(store, set, &RunArgs::default());
    let st = migrator.status().await?;
    // Report edits of applied migrations too, without failing the status itself.
    let problem = match load_problem {
        Some(p) => Some(p),
        None => migrator
            .validate()
            .await
            .err()
            .map(|e| crate::render_chain(&e)),
    };
    if ctx.opt.json {
        let migrations: Vec<serde_json::Value> = st
            .migrations
            .iter()
            .map(|m| {
                serde_json::json!({"id": m.id, "name": m.name,
                    "state": if m.applied_at.is_some() { "applied" } else if m.in_progress { "in_progress" } else { "pending" },
                    "applied_at": m.applied_at})
            })
            .collect();
        let lease = st.lease.as_ref().map(|l| {
            serde_json::json!({"holder": l.holder, "token": l.token, "expires_in_ms": l.expires_at - st.now,
                "expired": l.expires_at <= st.now})
        });
        let running = st.running.as_ref().map(|r| {
            serde_json::json!({"migration": r.migration, "stage": r.stage, "phase": r.phase,
                "processed": r.counts.processed, "checkpoints": r.checkpoints,
                "partitions": r.partitions.as_ref().map(|p| super::partitions_view::json(p, st.now))})
        });
        let sweep = st.sweep.as_ref().map(|s| {
            serde_json::json!({"kind": s.kind, "name": s.name, "migrated": s.migrated,
                "partitions": s.partitions.as_ref().map(|p| super::partitions_view::json(p, st.now))})
        });
        crate::outln!(
            "{}",
            serde_json::json!({"store": ctx.store_url().map(tern_core::store::url::redact).unwrap_or_default(),
                "migrations": migrations, "kinds": st.kinds, "lock": lease, "running": running, "sweep": sweep, "problem": problem,
                "lazy": crate::cmd::sweep::lazy_json(&lazy)})
        );
        return Ok(EXIT_OK);
    }
    crate::outln!(
        "store: {}",
        ctx.store_url()
            .map(tern_core::store::url::redact)
            .unwrap_or_default()
    );
    if st.migrations.is_empty() {
        crate::outln!("no migrations in {}", ctx.settings.migrations_dir.display());
    }
    for m in &st.migrations {
        let state = if m.applied_at.is_some() {
            "applied"
        } else if m.in_progress {
            "in progress (interrupted; `tern up` resumes it)"
        } else {
            "pending"
        };
        crate::outln!("  {:04}_{:<30} {state}", m.id, m.name);
    }
    if !st.kinds.is_empty() {
        crate::outln!("kind versions:");
        for (k, v) in &st.kinds {
            crate::outln!("  {k:<30} v{v}");
        }
    }
    crate::cmd::sweep::print_lazy(&lazy);
    if let Some(parts) = st.running.as_ref().and_then(|r| r.partitions.as_ref()) {
        super::partitions_view::print(parts, st.now);
    }
    if let Some(sweep) = &st.sweep
        && let Some(parts) = &sweep.partitions
    {
        super::partitions_view::print_sweep(&sweep.kind, &sweep.name, parts, st.now);
    }
    if let Some(l) = &st.lease {
        if l.expires_at > st.now {
            crate::outln!(
                "lock: held by {} (token {}), expires in {} ms",
                l.holder,
                l.token,
                l.expires_at - st.now
            );
        } else {
            crate::outln!(
                "lock: left by {} (token {}), expired; the next `tern up` takes it over",
                l.holder,
                l.token
            );
        }
    }
    if let Some(p) = problem {
        crate::outln!("problem: {p}");
    }
    Ok(EXIT_OK)
}

/// `tern verify`: the census. Exit 1 when entities are below or above their
/// kind's version, stale under a pending lazy migration (a kind rename's
/// former names included), under a former kind name no migration sweeps, or
/// a migration is in progress (interrupted).
///
/// # Errors
/// A store error.
pub async fn verify(ctx: &Ctx) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let set = ctx.migrations().unwrap_or_default();
    let migrator = ctx.migrator(store, set, &RunArgs::default());
    let census = migrator.census().await?;
    let behind: u64 = census
        .iter()
        .map(tern_core::migrate::KindCensus::behind)
        .sum();
    // Entities above their kind's version were never written by tern's steps
    // (an import with a made-up version, or a migration half done).
    let above_of = |c: &tern_core::migrate::KindCensus| -> u64 {
        c.versions
            .range(c.expected.saturating_add(1)..)
            .map(|(_, n)| n)
            .sum()
    };
    let above: u64 = census.iter().map(above_of).sum();
    let doc = state::load(migrator.store().as_ref()).await?.doc;
    let running = doc.running.clone();
    let lazy = lazy_findings(migrator.store().as_ref(), &doc).await?;
    // Entities below a kind with a pending lazy migration are the sweep's.
    let behind_lazy: u64 = census
        .iter()
        .filter(|c| lazy.stale.iter().any(|s| s.kind == c.kind))
        .map(tern_core::migrate::KindCensus::behind)
        .sum();
    let lazy_stale: u64 = lazy.stale.iter().filter_map(|s| s.stale).sum();
    let stranded: u64 = lazy.stranded.iter().map(|(_, n)| n).sum();
    let ok = behind == 0 && above == 0 && running.is_none() && lazy_stale == 0 && stranded == 0;
    if ctx.opt.json {
        let kinds: Vec<serde_json::Value> = census
            .iter()
            .map(|c| {
                let versions: serde_json::Map<String, serde_json::Value> = c
                    .versions
                    .iter()
                    .map(|(v, n)| (v.to_string(), serde_json::json!(n)))
                    .collect();
                serde_json::json!({"kind": c.kind, "expected": c.expected, "versions": versions,
                    "behind": c.behind(), "above": above_of(c)})
            })
            .collect();
        let in_progress = running.as_ref().map(|r| {
            serde_json::json!({"migration": r.migration, "stage": r.stage, "processed": r.counts.processed})
        });
        let stranded_json: Vec<serde_json::Value> = lazy
            .stranded
            .iter()
            .map(|(r, n)| {
                serde_json::json!({"former": r.former, "kind": r.now, "migration": r.migration, "entities": n})
            })
            .collect();
        crate::outln!(
            "{}",
            serde_json::json!({"kinds": kinds, "behind": behind, "above": above,
                "in_progress": in_progress, "lazy": crate::cmd::sweep::lazy_json(&lazy.stale),
                "lazy_stale": lazy_stale, "stranded": stranded_json, "ok": ok})
        );
    } else {
        for c in &census {
            let versions: Vec<String> = c
                .versions
                .iter()
                .map(|(v, n)| format!("v{v}: {n}"))
                .collect();
            let mut verdicts = Vec::new();
            if c.behind() > 0 {
                verdicts.push(format!("{} BELOW v{}", c.behind(), c.expected));
            }
            if above_of(c) > 0 {
                verdicts.push(format!("{} ABOVE v{}", above_of(c), c.expected));
            }
            let verdict = if verdicts.is_empty() {
                "ok".to_owned()
            } else {
                verdicts.join(", ")
            };
            crate::outln!(
                "  {:<30} expected v{:<4} {:<40} {verdict}",
                c.kind,
                c.expected,
                versions.join(", ")
            );
        }
        if let Some(r) = &running {
            crate::outln!(
                "migration {} is in progress (interrupted at stage {}, {} entities done): run `tern up` to finish it",
                r.migration,
                r.stage + 1,
                r.counts.processed
            );
        }
        for k in &lazy.stale {
            let former = if k.former_names.is_empty() {
                String::new()
            } else {
                format!(
                    " (under {} and its former names {})",
                    k.kind,
                    k.former_names.join(", ")
                )
            };
            crate::outln!(
                "{} entities of {} are stale under pending lazy migration(s) {:?}{former}: run `tern sweep {}` to complete it",
                k.stale.unwrap_or(0),
                k.kind,
                k.pending,
                k.kind
            );
        }
        for (r, n) in &lazy.stranded {
            crate::outln!(
                "{n} entities lie under {}, the former name of {} (renamed by migration {}): tern never migrates them; \
                 export them and import them as {}, or delete them",
                r.former,
                r.now,
                r.migration,
                r.now
            );
        }
        let behind_eager = behind - behind_lazy;
        if behind_eager > 0 {
            crate::outln!(
                "{behind_eager} entities are below their kind's version: run `tern up` (it sweeps them) or check for old writers"
            );
        }
        if above > 0 && running.is_none() {
            crate::outln!(
                "{above} entities are above their kind's version: no migration wrote them so (an import with a wrong version?); tern will never migrate them"
            );
        }
        if ok {
            crate::outln!("verified: every entity is at its kind's version");
        }
    }
    Ok(if ok { EXIT_OK } else { EXIT_BEHIND })
}

/// What `tern verify` finds about lazy migrations.
struct LazyFindings {
    /// Kinds with a pending lazy migration and stale entities (exact counts).
    stale: Vec<tern_core::lazy::KindLazyStatus>,
    /// Entities under a former kind name that no pending lazy rename sweeps.
    stranded: Vec<(tern_core::lazy::RenamedAway, u64)>,
}

/// Counts the stale entities of pending lazy migrations (a scan of each such
/// kind) and the entities under former kind names.
async fn lazy_findings(
    store: &dyn tern_core::store::Store,
    doc: &tern_core::migrate::StateDoc,
) -> anyhow::Result<LazyFindings> {
    let stale = tern_core::lazy::status(store, true)
        .await?
        .into_iter()
        .filter(|k| !k.complete && k.stale.is_some_and(|n| n > 0))
        .collect();
    let mut stranded = Vec::new();
    for r in tern_core::lazy::renamed_away(doc) {
        if r.pending {
            continue;
        }
        let n = store
            .count(&r.former, tern_core::store::Filter::all())
            .await
            .map_err(tern_core::migrate::MigrateError::store(
                "counting a former kind name",
            ))?;
        if n > 0 {
            stranded.push((r, n));
        }
    }
    Ok(LazyFindings { stale, stranded })
}

/// `tern lock`: show the lock, or release an expired one.
///
/// # Errors
/// Exit 3 when asked to release a live lock without --force.
pub async fn lock(ctx: &Ctx, args: &LockArgs) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    if args.release {
        let removed = release_stale(store.as_ref(), args.force).await?;
        match (&removed, ctx.opt.json) {
            (Some(l), true) => crate::outln!(
                "{}",
                serde_json::json!({"released": {"holder": l.holder, "token": l.token}})
            ),
            (None, true) => crate::outln!("{}", serde_json::json!({"released": null})),
            (Some(l), false) => {
                crate::outln!("released the lock of {} (token {})", l.holder, l.token)
            }
            (None, false) => crate::outln!("no lock to release"),
        }
        return Ok(EXIT_OK);
    }
    let doc = state::load(store.as_ref()).await?.doc;
    let now = store
        .now()
        .await
        .map_err(tern_core::migrate::MigrateError::store("reading the clock"))?;
    match (&doc.lease, ctx.opt.json) {
        (Some(l), true) => crate::outln!(
            "{}",
            serde_json::json!({"lock": {"holder": l.holder, "token": l.token, "acquired_at": l.acquired_at,
                "expires_in_ms": l.expires_at - now, "expired": l.expires_at <= now}})
        ),
        (None, true) => crate::outln!("{}", serde_json::json!({"lock": null})),
        (Some(l), false) => {
            if l.expires_at > now {
                crate::outln!(
                    "held by {} (token {}), expires in {} ms",
                    l.holder,
                    l.token,
                    l.expires_at - now
                );
            } else {
                crate::outln!(
                    "left by {} (token {}), expired {} ms ago: `tern lock --release` removes it, `tern up` takes it over",
                    l.holder,
                    l.token,
                    now - l.expires_at
                );
            }
        }
        (None, false) => crate::outln!("free"),
    }
    Ok(EXIT_OK)
}
