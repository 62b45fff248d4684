//! `tern status`, `tern verify`, `tern lock`.

use tern_core::migrate::lease::release_stale;
use tern_core::migrate::state;

use crate::opt::{LockArgs, RunArgs};
use crate::{Ctx, EXIT_BEHIND, EXIT_OK};

fn no_overrides() -> RunArgs {
    RunArgs {
        to: None,
        batch_size: None,
        max_rate: None,
    }
}

/// `tern status`.
///
/// # Errors
/// A store error or an inconsistent migrations folder.
pub async fn status(ctx: &Ctx, exact: bool) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let set = ctx.migrations()?;
    let lazy = tern_core::lazy::status(store.as_ref(), exact).await?;
    let migrator = ctx.migrator(store, set, &no_overrides());
    let st = migrator.status().await?;
    // Report edits of applied migrations too, without failing the status itself.
    let problem = migrator
        .validate()
        .await
        .err()
        .map(|e| crate::render_chain(&e));
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
                "processed": r.counts.processed, "checkpoints": r.checkpoints})
        });
        println!(
            "{}",
            serde_json::json!({"store": ctx.store_url().map(tern_core::store::url::redact).unwrap_or_default(),
                "migrations": migrations, "kinds": st.kinds, "lock": lease, "running": running, "problem": problem,
                "lazy": crate::cmd::sweep::lazy_json(&lazy)})
        );
        return Ok(EXIT_OK);
    }
    println!(
        "store: {}",
        ctx.store_url()
            .map(tern_core::store::url::redact)
            .unwrap_or_default()
    );
    if st.migrations.is_empty() {
        println!("no migrations in {}", ctx.settings.migrations_dir.display());
    }
    for m in &st.migrations {
        let state = if m.applied_at.is_some() {
            "applied"
        } else if m.in_progress {
            "in progress (interrupted; `tern up` resumes it)"
        } else {
            "pending"
        };
        println!("  {:04}_{:<30} {state}", m.id, m.name);
    }
    if !st.kinds.is_empty() {
        println!("kind versions:");
        for (k, v) in &st.kinds {
            println!("  {k:<30} v{v}");
        }
    }
    crate::cmd::sweep::print_lazy(&lazy);
    if let Some(l) = &st.lease {
        if l.expires_at > st.now {
            println!(
                "lock: held by {} (token {}), expires in {} ms",
                l.holder,
                l.token,
                l.expires_at - st.now
            );
        } else {
            println!(
                "lock: left by {} (token {}), expired; the next `tern up` takes it over",
                l.holder, l.token
            );
        }
    }
    if let Some(p) = problem {
        println!("problem: {p}");
    }
    Ok(EXIT_OK)
}

/// `tern verify`: the census. Exit 1 when entities are below their kind's version.
///
/// # Errors
/// A store error.
pub async fn verify(ctx: &Ctx) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let set = ctx.migrations().unwrap_or_default();
    let migrator = ctx.migrator(store, set, &no_overrides());
    let census = migrator.census().await?;
    let behind: u64 = census
        .iter()
        .map(tern_core::migrate::KindCensus::behind)
        .sum();
    if ctx.opt.json {
        let kinds: Vec<serde_json::Value> = census
            .iter()
            .map(|c| {
                let versions: serde_json::Map<String, serde_json::Value> =
                    c.versions.iter().map(|(v, n)| (v.to_string(), serde_json::json!(n))).collect();
                serde_json::json!({"kind": c.kind, "expected": c.expected, "versions": versions, "behind": c.behind()})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"kinds": kinds, "behind": behind, "ok": behind == 0})
        );
    } else {
        for c in &census {
            let versions: Vec<String> = c
                .versions
                .iter()
                .map(|(v, n)| format!("v{v}: {n}"))
                .collect();
            let verdict = if c.behind() == 0 {
                "ok".to_owned()
            } else {
                format!("{} BELOW v{}", c.behind(), c.expected)
            };
            println!(
                "  {:<30} expected v{:<4} {:<40} {verdict}",
                c.kind,
                c.expected,
                versions.join(", ")
            );
        }
        if behind == 0 {
            println!("verified: every entity is at its kind's version");
        } else {
            println!(
                "{behind} entities are below their kind's version: run `tern up` (it sweeps them) or check for old writers"
            );
        }
    }
    Ok(if behind == 0 { EXIT_OK } else { EXIT_BEHIND })
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
            (Some(l), true) => println!(
                "{}",
                serde_json::json!({"released": {"holder": l.holder, "token": l.token}})
            ),
            (None, true) => println!("{}", serde_json::json!({"released": null})),
            (Some(l), false) => println!("released the lock of {} (token {})", l.holder, l.token),
            (None, false) => println!("no lock to release"),
        }
        return Ok(EXIT_OK);
    }
    let doc = state::load(store.as_ref()).await?.doc;
    let now = store
        .now()
        .await
        .map_err(tern_core::migrate::MigrateError::store("reading the clock"))?;
    match (&doc.lease, ctx.opt.json) {
        (Some(l), true) => println!(
            "{}",
            serde_json::json!({"lock": {"holder": l.holder, "token": l.token, "acquired_at": l.acquired_at,
                "expires_in_ms": l.expires_at - now, "expired": l.expires_at <= now}})
        ),
        (None, true) => println!("{}", serde_json::json!({"lock": null})),
        (Some(l), false) => {
            if l.expires_at > now {
                println!(
                    "held by {} (token {}), expires in {} ms",
                    l.holder,
                    l.token,
                    l.expires_at - now
                );
            } else {
                println!(
                    "left by {} (token {}), expired {} ms ago: `tern lock --release` removes it, `tern up` takes it over",
                    l.holder,
                    l.token,
                    now - l.expires_at
                );
            }
        }
        (None, false) => println!("free"),
    }
    Ok(EXIT_OK)
}
