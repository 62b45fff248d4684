//! `tern advise MODEL WORKLOAD`: the [NoSE] schema advisor (crate `tern-advisor`).

use std::io::Write as _;
use std::path::PathBuf;

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use tern_advisor::cost::{CostModel, Sample};
use tern_advisor::{Model, Options, Workload, migration, render};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};

use crate::EXIT_OK;

/// `tern advise`.
#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// The conceptual model (entities, fields, statistics, relationships); see docs/advisor.md.
    pub model: PathBuf,
    /// The weighted workload of queries and updates.
    pub workload: PathBuf,
    /// Print the recommendation as JSON.
    #[arg(long)]
    pub json: bool,
    /// The most bytes the recommended column families may take.
    #[arg(long, value_name = "BYTES")]
    pub space_budget: Option<f64>,
    /// The workload mix whose weights apply.
    #[arg(long, value_name = "NAME", default_value = "default")]
    pub mix: String,
    /// Seconds the solver may spend per stage; then the best schema found is printed, marked not proven optimal.
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<f64>,
    /// Break ties between schemas of equal cost and count by the least space exactly (a third
    /// solve; slower: WS 3x 39 s against 5 s). Without it, the space tie-break is approximate
    /// (within 1.5 % of the least space on the benchmark's workloads; docs/advisor.md).
    #[arg(long)]
    pub exact_space: bool,
    /// Write the migration that builds the recommended column families (and their CQL) into DIR.
    #[arg(long, value_name = "DIR")]
    pub emit_migration: Option<PathBuf>,
    /// Measure gets of n partitions × w rows on this store, fit the cost model `T(n, w)` to them
    /// (least squares) and advise with it; the store gets a scratch kind, removed afterwards.
    #[arg(long, value_name = "STORE_URL")]
    pub calibrate: Option<String>,
    /// Load data generated from the model's statistics into this store, in the recommended schema
    /// and in the normalized baseline, and time the queries' plans on both.
    #[arg(long, value_name = "STORE_URL")]
    pub execute: Option<String>,
    /// With --execute: instances of the largest entity (the others scale alike).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub execute_rows: usize,
    /// With --execute: executions of each query per schema.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub execute_runs: usize,
}

/// The scratch kind the calibration writes (and deletes).
pub const CALIBRATION_KIND: &str = "tern_advise_calibration";
/// Rows per partition measured.
const WIDTHS: [usize; 3] = [1, 10, 100];
/// Gets per measurement.
const GETS: [usize; 4] = [1, 5, 20, 50];
/// Partitions written per width (gets cycle through them).
const PARTITIONS: usize = 50;
/// Repetitions of each measurement; the median is kept.
const REPEATS: usize = 7;

fn partition_key(w: usize, p: usize) -> anyhow::Result<Key> {
    Ok(Key::new(CALIBRATION_KIND, format!("w{w}-p{p}"))?)
}

/// Writes partitions of 1, 10 and 100 rows (one entity each, its rows an array of 40-byte maps),
/// times sequential gets of n of them, and returns the samples (median of the repetitions) after
/// deleting the partitions again.
///
/// # Errors
/// The store fails, or a partition does not read back with its rows.
pub async fn measure(store: &dyn Store) -> anyhow::Result<Measured> {
    for w in WIDTHS {
        let mut writes = Vec::with_capacity(PARTITIONS);
        for p in 0..PARTITIONS {
            let rows: Vec<Value> = (0..w)
                .map(|r| {
                    Value::Map(Map::from([
                        ("c".to_owned(), Value::Int(r as i64)),
                        ("v".to_owned(), Value::String("x".repeat(32))),
                    ]))
                })
                .collect();
            writes.push(Write::Put(Entity::new(
                partition_key(w, p)?,
                Map::from([("rows".to_owned(), Value::Array(rows))]),
            )));
        }
        store.write_batch(writes).await?;
    }
    let mut samples = Vec::new();
    for w in WIDTHS {
        for n in GETS {
            let mut times = Vec::with_capacity(REPEATS);
            for rep in 0..REPEATS {
                let start = Instant::now();
                for i in 0..n {
                    let key = partition_key(w, (i + rep * n) % PARTITIONS)?;
                    let rows = match store
                        .get(&key)
                        .await?
                        .and_then(|e| e.value.get("rows").cloned())
                    {
                        Some(Value::Array(rows)) => rows.len(),
                        _ => 0,
                    };
                    if rows != w {
                        bail!(
                            "calibration partition {:?} read back {rows} rows, not {w}",
                            key.id
                        );
                    }
                }
                times.push(start.elapsed().as_secs_f64() * 1000.0);
            }
            times.sort_by(f64::total_cmp);
            samples.push(Sample {
                gets: n as f64,
                width: w as f64,
                ms: times[REPEATS / 2],
            });
        }
    }
    let mut deletes = Vec::new();
    for w in WIDTHS {
        for p in 0..PARTITIONS {
            deletes.push(Write::Delete(partition_key(w, p)?));
        }
    }
    store.write_batch(deletes).await?;
    // Writes: batches of k one-row puts, then the same k deletes.
    let (mut puts, mut dels) = (Vec::new(), Vec::new());
    for k in [1usize, 10, 50] {
        let (mut tp, mut td) = (Vec::new(), Vec::new());
        for rep in 0..REPEATS {
            let keys: Vec<Key> = (0..k)
                .map(|i| partition_key(0, rep * 100 + i))
                .collect::<anyhow::Result<_>>()?;
            let writes = keys
                .iter()
                .map(|key| {
                    Write::Put(Entity::new(
                        key.clone(),
                        Map::from([("v".to_owned(), Value::String("x".repeat(32)))]),
                    ))
                })
                .collect();
            let start = Instant::now();
            store.write_batch(writes).await?;
            tp.push(start.elapsed().as_secs_f64() * 1000.0);
            let start = Instant::now();
            store
                .write_batch(keys.into_iter().map(Write::Delete).collect())
                .await?;
            td.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        tp.sort_by(f64::total_cmp);
        td.sort_by(f64::total_cmp);
        puts.push((k as f64, tp[REPEATS / 2]));
        dels.push((k as f64, td[REPEATS / 2]));
    }
    Ok(Measured {
        gets: samples,
        puts,
        deletes: dels,
    })
}

/// What [`measure`] found.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Gets of n partitions × w rows.
    pub gets: Vec<Sample>,
    /// (rows, ms) of batches of one-row puts.
    pub puts: Vec<(f64, f64)>,
    /// (rows, ms) of batches of deletes.
    pub deletes: Vec<(f64, f64)>,
}

/// Measures on the store at `url` and fits the cost model: the lookup constants by least squares
/// over the gets, insert and delete as the slopes of the write batches; the sort penalty is kept
/// from `base`.
///
/// # Errors
/// The store cannot be opened or fails, or the samples determine no fit.
pub async fn calibrate(url: &str, base: &CostModel) -> anyhow::Result<(CostModel, Measured)> {
    let store = crate::connect::open(url).await?;
    let measured = measure(store.as_ref()).await?;
    let mut fitted = base
        .fit(&measured.gets)
        .context("the calibration samples determine no cost model")?;
    fitted.insert = tern_advisor::cost::slope(&measured.puts).unwrap_or(base.insert);
    fitted.delete = tern_advisor::cost::slope(&measured.deletes).unwrap_or(base.delete);
    Ok((fitted, measured))
}

/// Runs `tern advise`.
///
/// # Errors
/// Unreadable or invalid inputs, no solution, or unwritable output.
pub async fn run(args: &AdviseArgs) -> anyhow::Result<u8> {
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let model = Model::parse(&args.model.display().to_string(), &read(&args.model)?)?;
    let workload = Workload::parse(
        &args.workload.display().to_string(),
        &read(&args.workload)?,
        &model,
    )?;
    let mut cost = CostModel::default();
    if let Some(url) = &args.calibrate {
        let (fitted, measured) = calibrate(url, &cost).await?;
        crate::errln!(
            "calibrated on {} ({} samples of n gets x w rows, least squares): T(n, w) = {:.6} + {:.6}*n + {:.6}*n*w ms; insert {:.6} ms/row, delete {:.6} ms/row (slopes of batches of 1, 10, 50); sort penalty kept at {} ms",
            tern_core::store::url::redact(url),
            measured.gets.len(),
            fitted.request,
            fitted.partition,
            fitted.row,
            fitted.insert,
            fitted.delete,
            fitted.sort
        );
        cost = fitted;
    }
    let opts = Options {
        mix: args.mix.clone(),
        space_budget: args.space_budget,
        time_limit: args.time_limit,
        cost,
        strategy: tern_advisor::solver::Strategy {
            exact_space: args.exact_space,
            ..Default::default()
        },
    };
    let prepared = tern_advisor::advise::prepare(&model, &workload, &opts)?;
    let rec = prepared.recommend(&opts)?;
    let out = if args.json {
        serde_json::to_string_pretty(&rec)? + "\n"
    } else {
        render::text(&rec)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(e).context("cannot write to stdout");
        }
        _ => {}
    }
    if let Some(url) = &args.execute {
        let report = compare(url, &model, &prepared, &rec, &opts, args).await?;
        if args.json {
            crate::errout!("{report}");
        } else {
            crate::out!("{report}");
        }
    }
    if let Some(dir) = &args.emit_migration {
        let files = migration::emit(&model, &rec, dir)?;
        for f in files {
            crate::errln!("wrote {}", f.display());
        }
    }
    Ok(EXIT_OK)
}

/// Loads both schemas, times every query on both, and renders the comparison.
async fn compare(
    url: &str,
    model: &Model,
    prepared: &tern_advisor::advise::Prepared<'_>,
    rec: &tern_advisor::Recommendation,
    opts: &Options,
    args: &AdviseArgs,
) -> anyhow::Result<String> {
    use std::collections::BTreeMap;

    use crate::cmd::advise_exec as exec;

    let store = crate::connect::open(url).await?;
    let data = exec::generate(model, args.execute_rows.max(1), 42);
    let mut kind_of: BTreeMap<usize, String> = BTreeMap::new();
    for cf in &rec.column_families {
        let j = prepared
            .pool
            .find(&cf.definition)
            .context("a recommended column family is not among the candidates")?;
        let kind = format!("advise_rec_{}", cf.name);
        let rows = exec::cf_rows(model, &data, &cf.definition);
        exec::load(store.as_ref(), &kind, &cf.definition, rows).await?;
        kind_of.insert(j, kind);
    }
    let queries: Vec<&tern_advisor::query::Query> =
        prepared.queries.iter().map(|q| &q.3.query).collect();
    let base = exec::baseline(model, &queries);
    for (i, cf) in base.iter().enumerate() {
        let rows = exec::cf_rows(model, &data, cf);
        exec::load(store.as_ref(), &format!("advise_base_{i}"), cf, rows).await?;
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
                    (format!("advise_base_{i}"), &base[i])
                })
                .collect::<Vec<_>>()
        });
        base_plans.push((&space.query, plan));
    }
    let runs = args.execute_runs.max(1);
    let r = exec::time_plans(store.as_ref(), model, &data, &rec_plans, runs, 7).await?;
    let b = exec::time_plans(store.as_ref(), model, &data, &base_plans, runs, 7).await?;
    let queries: Vec<(&str, f64)> = prepared
        .queries
        .iter()
        .map(|(name, _, w, _)| (name.as_str(), *w))
        .collect();
    Ok(render_comparison(
        url,
        runs,
        args.execute_rows,
        &queries,
        &r,
        &b,
    ))
}

/// The side-by-side table of `compare`: per query (name, weight) the recommended and baseline
/// times, then the weighted means.
fn render_comparison(
    url: &str,
    runs: usize,
    rows: usize,
    queries: &[(&str, f64)],
    r: &crate::cmd::advise_exec::Measured,
    b: &crate::cmd::advise_exec::Measured,
) -> String {
    use std::fmt::Write as _;

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
    for (i, (name, w)) in queries.iter().enumerate() {
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
