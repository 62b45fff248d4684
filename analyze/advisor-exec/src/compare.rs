//! `--execute`: the recommended schema and the normalized baseline loaded side by side, every
//! query timed on both.

use std::collections::BTreeMap;

use tern_advisor::advise::Prepared;
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
    let queries: Vec<&Query> = prepared.queries.iter().map(|q| &q.3.query).collect();
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
    Ok(Some(Comparison {
        queries: prepared
            .queries
            .iter()
            .map(|(name, _, w, _)| (name.clone(), *w))
            .collect(),
        recommended: r,
        baseline: b,
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
    out
}
