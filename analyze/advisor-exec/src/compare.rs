//! `--execute`: the recommended schema and the normalized baseline loaded side by side, every
//! query timed on both, then every update (its support queries and its writes) on both.

use std::collections::BTreeMap;

use tern_advisor::advise::Prepared;
use tern_advisor::column_family::ColumnFamily;
use tern_advisor::model::Model;
use tern_advisor::query::Query;
use tern_advisor::{Options, Recommendation};
use tern_core::migrate::CancelFlag;
use tern_core::store::Store;

use crate::baseline::baseline;
use crate::data::{cf_rows, generate};
use crate::error::{ExecError, Result};
use crate::execute::{Measured, time_plans};
use crate::layout::{Written, load};
use crate::update::{maintained, time_updates};

/// The kinds one `--execute` run writes start with this, then a tag unique to the run.
pub const EXECUTE_KIND_PREFIX: &str = "tern_advise_exec";

/// Loads the recommended column families and the normalized baseline into kinds `{tag}_rec_cfN`
/// and `{tag}_base_N` (every key written is added to `written`), and times every query's cheapest
/// plan in both. `None`: `cancel` was set (between loads or queries).
///
/// # Errors
/// The store fails, or a recommended column family is not among the candidates.
#[allow(clippy::too_many_arguments)]
pub async fn compare_on(
    store: &dyn Store,
    tag: &str,
    model: &Model,
    prepared: &Prepared<'_>,
    rec: &Recommendation,
    opts: &Options,
    rows: usize,
    runs: usize,
    cancel: &CancelFlag,
    written: &mut Written,
) -> Result<Option<Comparison>> {
    let data = generate(model, rows.max(1), 42);
    let mut kind_of: BTreeMap<usize, String> = BTreeMap::new();
    for cf in &rec.column_families {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let j = prepared
            .pool
            .find(&cf.definition)
            .ok_or_else(|| ExecError::NotACandidate(cf.name.clone()))?;
        let kind = format!("{tag}_rec_{}", cf.name);
        let cf_rows = cf_rows(model, &data, &cf.definition);
        load(store, &kind, &cf.definition, cf_rows, written).await?;
        kind_of.insert(j, kind);
    }
    // The baseline indexes the attributes the queries and the updates look up by.
    let lookups: Vec<Query> = prepared
        .updates
        .iter()
        .map(|(_, _, _, u, _)| Query {
            graph: u.graph.clone(),
            select: Default::default(),
            eq: u.eq.clone(),
            range: Default::default(),
            order: Vec::new(),
            limit: None,
        })
        .collect();
    let queries: Vec<&Query> = prepared
        .queries
        .iter()
        .map(|q| &q.3.query)
        .chain(&lookups)
        .collect();
    let base = baseline(model, &queries);
    for (i, cf) in base.iter().enumerate() {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let cf_rows = cf_rows(model, &data, cf);
        load(store, &format!("{tag}_base_{i}"), cf, cf_rows, written).await?;
    }
    let mut rec_plans = Vec::new();
    let mut base_plans = Vec::new();
    for (_, _, _, space) in &prepared.queries {
        let plan = space
            .cheapest(|j| kind_of.contains_key(&j))
            .map(|(_, steps)| {
                steps
                    .iter()
                    .map(|&s| {
                        let j = space.steps[s].cf;
                        (
                            kind_of.get(&j).cloned().unwrap_or_default(),
                            &prepared.pool.candidates[j],
                        )
                    })
                    .collect::<Vec<_>>()
            });
        rec_plans.push((&space.query, plan));
        let bspace = tern_advisor::advise::plan_space(model, &opts.cost, &base, &space.query);
        let plan = bspace.cheapest(|_| true).map(|(_, steps)| {
            steps
                .iter()
                .map(|&s| {
                    let i = bspace.steps[s].cf;
                    (format!("{tag}_base_{i}"), &base[i])
                })
                .collect::<Vec<_>>()
        });
        base_plans.push((&space.query, plan));
    }
    let runs = runs.max(1);
    let Some(r) = time_plans(store, model, &data, &rec_plans, runs, 7, cancel).await? else {
        return Ok(None);
    };
    let Some(b) = time_plans(store, model, &data, &base_plans, runs, 7, cancel).await? else {
        return Ok(None);
    };
    // Then the updates, after the queries (they change the data): each schema its own kinds.
    let rec_schema: Vec<(String, &ColumnFamily)> = rec
        .column_families
        .iter()
        .map(|c| (format!("{tag}_rec_{}", c.name), &c.definition))
        .collect();
    let base_schema: Vec<(String, &ColumnFamily)> = base
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("{tag}_base_{i}"), c))
        .collect();
    let rec_updates: Vec<_> = prepared
        .updates
        .iter()
        .map(|(_, _, _, u, _)| (u, maintained(model, &opts.cost, u, &rec_schema)))
        .collect();
    let base_updates: Vec<_> = prepared
        .updates
        .iter()
        .map(|(_, _, _, u, _)| (u, maintained(model, &opts.cost, u, &base_schema)))
        .collect();
    let Some(ru) =
        time_updates(store, model, &data, &rec_updates, runs, 11, cancel, written).await?
    else {
        return Ok(None);
    };
    let Some(bu) = time_updates(
        store,
        model,
        &data,
        &base_updates,
        runs,
        11,
        cancel,
        written,
    )
    .await?
    else {
        return Ok(None);
    };
    // The same queries again on both: maintained alike, the schemas still answer alike.
    let Some(ra) = time_plans(store, model, &data, &rec_plans, runs, 13, cancel).await? else {
        return Ok(None);
    };
    let Some(ba) = time_plans(store, model, &data, &base_plans, runs, 13, cancel).await? else {
        return Ok(None);
    };
    let differ_after = prepared
        .queries
        .iter()
        .enumerate()
        .filter(|(i, _)| match (ra.per_query[*i], ba.per_query[*i]) {
            (Some((_, a)), Some((_, b))) => (a - b).abs() > 1e-9,
            _ => false,
        })
        .map(|(_, q)| q.0.clone())
        .collect();
    Ok(Some(Comparison {
        differ_after,
        queries: prepared
            .queries
            .iter()
            .map(|(name, _, w, _)| (name.clone(), *w))
            .collect(),
        recommended: r,
        baseline: b,
        updates: prepared
            .updates
            .iter()
            .map(|(name, _, w, _, _)| (name.clone(), *w))
            .collect(),
        recommended_updates: ru,
        baseline_updates: bu,
    }))
}

/// What [`compare_on`] measured.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// (name, weight) per query.
    pub queries: Vec<(String, f64)>,
    /// The recommended schema.
    pub recommended: Measured,
    /// The normalized baseline.
    pub baseline: Measured,
    /// (name, weight) per update.
    pub updates: Vec<(String, f64)>,
    /// The updates on the recommended schema (per update: mean ms, mean rows written).
    pub recommended_updates: Measured,
    /// The updates on the normalized baseline.
    pub baseline_updates: Measured,
    /// The queries whose answers differ between the schemas when run again after the updates
    /// (with other parameters): empty when both schemas were maintained alike.
    pub differ_after: Vec<String>,
}

/// The side-by-side table of `--execute`: per query (name, weight) the recommended and baseline
/// times, then the weighted means.
pub fn render_comparison(url: &str, runs: usize, rows: usize, c: &Comparison) -> String {
    use std::fmt::Write as _;

    let (r, b) = (&c.recommended, &c.baseline);
    let mut out = format!(
        "-- executed on {} ({} runs per query; data: largest entity {} instances)\n",
        tern_core::store::url::redact(url),
        runs,
        rows
    );
    let _ = writeln!(
        out,
        "{:<28} {:>8} {:>14} {:>14} {:>10}",
        "query", "weight", "recommended ms", "baseline ms", "rows"
    );
    let (mut wr, mut wb, mut wsum) = (0.0, 0.0, 0.0);
    for (i, (name, w)) in c.queries.iter().enumerate() {
        match (r.per_query[i], b.per_query[i]) {
            (Some((tr, rows_r)), Some((tb, rows_b))) => {
                let rows = if (rows_r - rows_b).abs() < 1e-9 {
                    format!("{rows_r:.1}")
                } else {
                    format!("{rows_r:.1}!={rows_b:.1}")
                };
                let _ = writeln!(out, "{name:<28} {w:>8.3} {tr:>14.4} {tb:>14.4} {rows:>10}");
                wr += w * tr;
                wb += w * tb;
                wsum += w;
            }
            _ => {
                let _ = writeln!(out, "{name:<28} {w:>8.3} (no plan in one of the schemas)");
            }
        }
    }
    if wsum > 0.0 {
        let (mr, mb) = (wr / wsum, wb / wsum);
        let _ = writeln!(
            out,
            "-- weighted mean response time: recommended {mr:.4} ms, normalized baseline {mb:.4} ms ({:.2}x)",
            if mr > 0.0 { mb / mr } else { f64::NAN }
        );
    }
    if c.updates.is_empty() {
        return out;
    }
    // The updates: their support queries and writes on each schema.
    let _ = writeln!(
        out,
        "{:<28} {:>8} {:>14} {:>14} {:>10}",
        "update", "weight", "recommended ms", "baseline ms", "rows r/b"
    );
    let (ru, bu) = (&c.recommended_updates, &c.baseline_updates);
    let (mut all_r, mut all_b, mut all_w) = (wr, wb, wsum);
    for (i, (name, w)) in c.updates.iter().enumerate() {
        match (ru.per_query[i], bu.per_query[i]) {
            (Some((tr, rows_r)), Some((tb, rows_b))) => {
                let rows = format!("{rows_r:.1}/{rows_b:.1}");
                let _ = writeln!(out, "{name:<28} {w:>8.3} {tr:>14.4} {tb:>14.4} {rows:>10}");
                all_r += w * tr;
                all_b += w * tb;
                all_w += w;
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{name:<28} {w:>8.3} (cannot be maintained in one of the schemas)"
                );
            }
        }
    }
    if c.differ_after.is_empty() {
        let _ = writeln!(
            out,
            "-- after the updates both schemas still answer every query alike"
        );
    } else {
        let _ = writeln!(
            out,
            "-- after the updates the schemas answer differently: {}",
            c.differ_after.join(", ")
        );
    }
    if all_w > 0.0 {
        let (mr, mb) = (all_r / all_w, all_b / all_w);
        let _ = writeln!(
            out,
            "-- weighted mean per statement, queries and updates: recommended {mr:.4} ms, normalized baseline {mb:.4} ms ({:.2}x)",
            if mr > 0.0 { mb / mr } else { f64::NAN }
        );
    }
    out
}
