//! `tern status`'s view of a partitioned stage or sweep: each partition done,
//! running (its worker and rate) or waiting.

use tern_core::migrate::{PartitionState, StagePartitions};

/// What one partition is doing at `now` (ms, the store's clock).
fn state_of(p: &PartitionState, now: i64) -> (&'static str, Option<f64>) {
    match &p.lease {
        _ if p.done => ("done", None),
        Some(l) if l.expires_at > now => {
            let secs = (now - l.claimed_at).max(1) as f64 / 1000.0;
            let rate = p.counts.processed.saturating_sub(l.claimed_processed) as f64 / secs;
            ("running", Some(rate))
        }
        Some(_) => ("stalled", None),
        None => ("waiting", None),
    }
}

/// The partitions as JSON, for `tern status --json`.
pub(crate) fn json(parts: &StagePartitions, now: i64) -> serde_json::Value {
    let list: Vec<serde_json::Value> = parts
        .parts
        .iter()
        .map(|p| {
            let (state, rate) = state_of(p, now);
            serde_json::json!({"partition": p.partition.label, "state": state,
                "processed": p.counts.processed, "changed": p.counts.changed,
                "owner": p.lease.as_ref().map(|l| &l.holder),
                "token": p.lease.as_ref().map(|l| l.token),
                "rate_per_s": rate.map(|r| r.round()), "takeovers": p.takeovers})
        })
        .collect();
    serde_json::json!({"stage": parts.stage, "kind": parts.kind, "partitions": list})
}

/// Prints the partitions of a stage of `tern up`, one a line, under a summary.
pub(crate) fn print(parts: &StagePartitions, now: i64) {
    print_titled(
        &format!("stage {} ({})", parts.stage + 1, parts.kind),
        parts,
        now,
    );
}

/// Prints the partitions of `tern sweep`'s pass over `name` (of kind `kind`).
pub(crate) fn print_sweep(kind: &str, name: &str, parts: &StagePartitions, now: i64) {
    let what = if kind == name {
        format!("the sweep of {kind}")
    } else {
        format!("the sweep of {kind} (former name {name})")
    };
    print_titled(&what, parts, now);
}

fn print_titled(what: &str, parts: &StagePartitions, now: i64) {
    let done = parts.parts.iter().filter(|p| p.done).count();
    crate::outln!(
        "partitions of {what}: {done} of {} done, {} entities processed",
        parts.parts.len(),
        parts.counts().processed
    );
    for p in &parts.parts {
        let (state, rate) = state_of(p, now);
        let detail = match (&p.lease, rate) {
            (Some(l), Some(rate)) => {
                format!(" by {} (token {}), {rate:.0} entities/s", l.holder, l.token)
            }
            (Some(l), None) if state == "stalled" => format!(
                " (lease of {} expired: the next worker takes it over from its checkpoint)",
                l.holder
            ),
            _ => String::new(),
        };
        crate::outln!(
            "  {:<40} {state:<8} {:>10} processed{detail}",
            p.partition.label,
            p.counts.processed
        );
    }
}
