//! `tern advise MODEL WORKLOAD`: the [NoSE] schema advisor (crate `tern-advisor`).

use std::io::Write as _;
use std::path::PathBuf;

use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use tern_advisor::advise::{Prepared, Recommendation};
use tern_advisor::budget::Interrupt;
use tern_advisor::cost::{CostModel, Sample};
use tern_advisor::{Model, Options, Workload, migration, render};
use tern_core::migrate::CancelFlag;
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
    /// Cost your own schema for the same workload, side by side with the recommendation: column
    /// families in the triple notation the output prints (`NAME [K][C][V] via HOLDER.FK, ...`, one
    /// a line) or CQL CREATE TABLE statements with `entity_field` columns.
    #[arg(long, value_name = "SCHEMA")]
    pub compare: Option<PathBuf>,
    /// The cost model's constants (`NAME = VALUE` lines in ms: request, partition, row, insert,
    /// delete, sort); those not given keep the Cassandra defaults. With --calibrate, the measured
    /// ones replace them.
    #[arg(long, value_name = "FILE")]
    pub costs: Option<PathBuf>,
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
    let measured = measure_inner(store).await;
    // Remove every partition the measurement may have written, whatever happened.
    let mut deletes = Vec::new();
    for w in WIDTHS {
        for p in 0..PARTITIONS {
            deletes.push(Write::Delete(partition_key(w, p)?));
        }
    }
    for rep in 0..REPEATS {
        for i in 0..50 {
            deletes.push(Write::Delete(partition_key(0, rep * 100 + i)?));
        }
    }
    let removed = store.write_batch(deletes).await;
    match (measured, removed) {
        (Ok(m), Ok(_)) => Ok(m),
        (Err(e), Ok(_)) => Err(e),
        (m, Err(e)) => Err(anyhow::Error::from(e).context(format!(
            "could not remove the calibration's scratch kind `{CALIBRATION_KIND}`{}: delete its entities by hand",
            match m {
                Ok(_) => String::new(),
                Err(first) => format!(" after the calibration failed ({first:#})"),
            }
        ))),
    }
}

async fn measure_inner(store: &dyn Store) -> anyhow::Result<Measured> {
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
        sort: measure_sort(),
    })
}

/// Rows a measured client-side sort orders (a wide partition's worth).
const SORT_ROWS: usize = 100;

/// The sort penalty: the median time to order [`SORT_ROWS`] rows (maps as a get returns them) by
/// an integer column, in the reverse of their order, in ms.
fn measure_sort() -> f64 {
    let rows: Vec<Value> = (0..SORT_ROWS)
        .map(|r| {
            Value::Map(Map::from([
                ("c".to_owned(), Value::Int(r as i64)),
                ("v".to_owned(), Value::String("x".repeat(32))),
            ]))
        })
        .collect();
    let key = |v: &Value| match v {
        Value::Map(m) => match m.get("c") {
            Some(Value::Int(i)) => -*i,
            _ => 0,
        },
        _ => 0,
    };
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let mut copy = rows.clone();
        let start = Instant::now();
        copy.sort_by_key(key);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        std::hint::black_box(&copy);
    }
    times.sort_by(f64::total_cmp);
    times[REPEATS / 2]
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
    /// The client-side sort of a wide partition's rows (ms).
    pub sort: f64,
}

/// Measures on the store at `url` and fits the cost model: the lookup constants by least squares
/// over the gets, insert and delete as the slopes of the write batches, the sort penalty as the
/// time of a client-side sort of a wide partition's rows. A missing embedded store is refused
/// unless `--create-store`; the password and `[tls]` files given apart from the URL apply ([`crate::Ctx::store_at`]).
///
/// # Errors
/// The store cannot be opened or fails, or the samples determine no fit.
pub async fn calibrate(
    ctx: &crate::Ctx,
    url: &str,
    base: &CostModel,
) -> anyhow::Result<(CostModel, Measured)> {
    let store = ctx.store_at(url).await?;
    let measured = measure(store.as_ref()).await?;
    let mut fitted = base
        .fit(&measured.gets)
        .context("the calibration samples determine no cost model")?;
    fitted.insert = tern_advisor::cost::slope(&measured.puts).unwrap_or(base.insert);
    fitted.delete = tern_advisor::cost::slope(&measured.deletes).unwrap_or(base.delete);
    fitted.sort = measured.sort;
    Ok((fitted, measured))
}

/// Where `tern advise` writes its answer: the process's stdout as it was when the command started.
/// CBC prints some notes (`195 slacks added`) with C's `printf` whatever its log level, so while
/// the advisor runs, file descriptor 1 points at stderr and only tern's own output reaches stdout.
struct Stdout {
    /// The saved stdout (`None`: it could not be saved, and descriptor 1 was left alone).
    file: Option<std::fs::File>,
}

impl Stdout {
    /// Keeps the current stdout for tern and points descriptor 1 at stderr.
    fn take() -> Stdout {
        let _ = std::io::stdout().lock().flush();
        #[cfg(unix)]
        {
            let saved = rustix::io::dup(rustix::stdio::stdout()).and_then(|fd| {
                rustix::stdio::dup2_stdout(rustix::stdio::stderr())?;
                Ok(fd)
            });
            match saved {
                Ok(fd) => Stdout {
                    file: Some(std::fs::File::from(fd)),
                },
                Err(e) => {
                    tracing::warn!("cannot keep CBC's notes off stdout: {e}");
                    Stdout { file: None }
                }
            }
        }
        #[cfg(not(unix))]
        Stdout { file: None }
    }

    /// Writes `text`; a closed pipe (`| head`) is not an error.
    fn print(&mut self, text: &str) -> anyhow::Result<()> {
        let r = match &mut self.file {
            Some(f) => f.write_all(text.as_bytes()).and_then(|()| f.flush()),
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
        };
        match r {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                Err(e).context("cannot write to stdout")
            }
            _ => Ok(()),
        }
    }
}

/// What `tern advise` tells the user when a signal stops it.
fn interrupted(left: &str) -> u8 {
    crate::errln!("interrupted: `tern advise` stopped before its answer{left}");
    tern_core::migrate::error::EXIT_INTERRUPTED
}

/// Stack of the advisor's thread: planning a long chain of entities recurses once per entity.
const ADVISOR_STACK: usize = 256 << 20;

/// Enumerates, plans and solves on a thread of its own (CBC blocks), polling `cancel`. `None`: the
/// signal came first (the thread stops at its next check, or with the process).
async fn solve(
    model: &'static Model,
    workload: Workload,
    opts: Options,
    cancel: &CancelFlag,
) -> anyhow::Result<Option<(Prepared<'static>, Recommendation)>> {
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("tern-advise".into())
        .stack_size(ADVISOR_STACK)
        .spawn(move || {
            let r = tern_advisor::advise::prepare(model, &workload, &opts)
                .and_then(|p| p.recommend(&opts).map(|r| (p, r)));
            let _ = tx.send(r);
        })
        .context("cannot start the advisor's thread")?;
    loop {
        tokio::select! {
            r = &mut rx => {
                return match r.context("the advisor's thread stopped without an answer")? {
                    Ok(done) => Ok(Some(done)),
                    Err(tern_advisor::AdvisorError::Cancelled) => Ok(None),
                    Err(e) => Err(e.into()),
                };
            }
            () = tokio::time::sleep(std::time::Duration::from_millis(50)) => {
                if cancel.is_cancelled() {
                    return Ok(None);
                }
            }
        }
    }
}

/// Runs `tern advise`.
///
/// # Errors
/// Unreadable or invalid inputs, no solution, or unwritable output.
pub async fn run(args: &AdviseArgs, ctx: &crate::Ctx) -> anyhow::Result<u8> {
    if !tern_advisor::solver::AVAILABLE {
        return Err(tern_advisor::AdvisorError::NoSolver.into());
    }
    crate::signals::set_messages(
        "stopping the advisor",
        "stopped; `tern advise` wrote nothing",
    );
    let cancel = ctx.cancel.clone();
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
    if let Some(path) = &args.costs {
        cost = CostModel::parse(&cost, &path.display().to_string(), &read(path)?)?;
    }
    let given = match &args.compare {
        Some(path) => Some((
            path.display().to_string(),
            tern_advisor::schema::parse(&model, &path.display().to_string(), &read(path)?)?,
        )),
        None => None,
    };
    let mut stdout = Stdout::take();
    if let Some(url) = &args.calibrate {
        let (fitted, measured) = calibrate(ctx, url, &cost).await?;
        crate::errln!(
            "calibrated on {} ({} samples of n gets x w rows, least squares): T(n, w) = {:.6} + {:.6}*n + {:.6}*n*w ms; insert {:.6} ms/row, delete {:.6} ms/row (slopes of batches of 1, 10, 50); sort penalty {:.6} ms (measured)",
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
        if cancel.is_cancelled() {
            return Ok(interrupted(" (the calibration's scratch kind is removed)"));
        }
    }
    let interrupt = {
        let cancel = cancel.clone();
        Interrupt::new(move || cancel.is_cancelled())
    };
    let opts = Options {
        mix: args.mix.clone(),
        space_budget: args.space_budget,
        time_limit: args.time_limit,
        cost,
        strategy: tern_advisor::solver::Strategy {
            exact_space: args.exact_space,
            ..Default::default()
        },
        interrupt,
        ..Options::default()
    };
    // The advisor's thread and what it returns borrow the model for the rest of the process.
    let model: &'static Model = Box::leak(Box::new(model));
    let workload_again = workload.clone();
    let Some((prepared, rec)) = solve(model, workload, opts.clone(), &cancel).await? else {
        return Ok(interrupted("; nothing was written"));
    };
    let costed = match &given {
        Some((_, schema)) => Some(tern_advisor::advise::cost_schema(
            model,
            &workload_again,
            &opts,
            schema,
        )?),
        None => None,
    };
    let out = if args.json {
        #[derive(serde::Serialize)]
        struct WithCompare<'a> {
            #[serde(flatten)]
            rec: &'a Recommendation,
            #[serde(skip_serializing_if = "Option::is_none")]
            compare: Option<&'a tern_advisor::advise::Costed>,
        }
        serde_json::to_string_pretty(&WithCompare {
            rec: &rec,
            compare: costed.as_ref(),
        })? + "\n"
    } else {
        let mut text = render::text(&rec);
        if let (Some(c), Some((file, _))) = (&costed, &given) {
            text.push_str(&render::comparison(&rec, c, file));
        }
        text
    };
    stdout.print(&out)?;
    if let Some(url) = &args.execute {
        let report = match compare(ctx, url, model, &prepared, &rec, &opts, args, &cancel).await {
            Ok(Some(report)) => report,
            Ok(None) => return Ok(interrupted(" (its scratch kinds are removed)")),
            Err(e) => return Err(e),
        };
        if args.json {
            crate::errout!("{report}");
        } else {
            stdout.print(&report)?;
        }
    }
    if let Some(dir) = &args.emit_migration {
        let files = migration::emit(model, &rec, dir)?;
        for f in files {
            crate::errln!("wrote {}", f.display());
        }
    }
    Ok(EXIT_OK)
}

/// The kinds one `--execute` run writes start with this, then a tag unique to the run.
pub const EXECUTE_KIND_PREFIX: &str = "tern_advise_exec";

/// Loads both schemas into scratch kinds of their own (`tern_advise_exec_<run>_...`), times every
/// query on both, removes every entity it wrote, and renders the comparison. `None`: interrupted
/// (after the clean-up).
#[allow(clippy::too_many_arguments)]
async fn compare(
    ctx: &crate::Ctx,
    url: &str,
    model: &Model,
    prepared: &Prepared<'_>,
    rec: &Recommendation,
    opts: &Options,
    args: &AdviseArgs,
    cancel: &CancelFlag,
) -> anyhow::Result<Option<String>> {
    use crate::cmd::advise_exec as exec;

    let store = ctx.store_at(url).await?;
    let tag = format!(
        "{EXECUTE_KIND_PREFIX}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000_000)
            .unwrap_or(0)
    );
    let mut written = exec::Written::default();
    let result = exec::compare_on(
        store.as_ref(),
        &tag,
        model,
        prepared,
        rec,
        opts,
        args.execute_rows,
        args.execute_runs,
        cancel,
        &mut written,
    )
    .await;
    let removed = written.remove(store.as_ref()).await;
    let note = match &removed {
        Ok(n) => format!("-- removed the {n} scratch entities it wrote (kinds {tag}_*)\n"),
        Err(e) => format!(
            "-- left {} scratch entities in the kinds {tag}_* (removing them failed: {e:#}); delete them with `tern --store URL export KIND` to list and a `drop kind` migration, or remove the store file\n",
            written.len()
        ),
    };
    crate::errout!("{}", note.trim_start_matches("-- "));
    match result? {
        None => Ok(None),
        Some(measured) => Ok(Some(render_comparison(
            url,
            args.execute_runs.max(1),
            args.execute_rows,
            &measured,
        ))),
    }
}

/// The side-by-side table of `--execute`: per query (name, weight) the recommended and baseline
/// times, then the weighted means.
fn render_comparison(
    url: &str,
    runs: usize,
    rows: usize,
    c: &crate::cmd::advise_exec::Comparison,
) -> String {
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
