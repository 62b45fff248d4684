//! `tern advise MODEL WORKLOAD`: the [NoSE] schema advisor (crate `tern-advisor`).

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tern_advisor::advise::{Prepared, Recommendation};
use tern_advisor::budget::Interrupt;
use tern_advisor::cost::CostModel;
use tern_advisor::{Model, Options, Workload, migration, render};
use tern_advisor_exec::{EXECUTE_KIND_PREFIX, Written, calibrate, compare_on, render_comparison};
use tern_core::migrate::CancelFlag;

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
    /// Seconds for the whole run: enumeration, planning and the solve each stop at their share
    /// and keep the best answer so far; the output notes what was cut (docs/advisor.md, "Limits").
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<f64>,
    /// Bound on the enumeration's work (attributes and entities of the candidates and queries it
    /// builds); past it the enumeration stops widening, with a note. 0: no bound.
    #[arg(long, value_name = "UNITS", default_value_t = tern_advisor::enumerate::DEFAULT_WORK_LIMIT)]
    pub enumeration_limit: u64,
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

/// Measures on the store at `url` and fits the cost model (`tern_advisor_exec::calibrate`). A
/// missing embedded store is refused unless `--create-store`; the password and `[tls]` files
/// given apart from the URL apply ([`crate::Ctx::store_at`]).
///
/// # Errors
/// The store cannot be opened or fails, or the samples determine no fit.
async fn calibrate(
    ctx: &crate::Ctx,
    url: &str,
    base: &CostModel,
) -> anyhow::Result<(CostModel, calibrate::Measured)> {
    let store = ctx.store_at(url).await?;
    Ok(calibrate::calibrate(store.as_ref(), base).await?)
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
        enumeration_limit: (args.enumeration_limit > 0).then_some(args.enumeration_limit),
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
    let store = ctx.store_at(url).await?;
    let tag = format!(
        "{EXECUTE_KIND_PREFIX}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000_000)
            .unwrap_or(0)
    );
    let mut written = Written::default();
    let result = compare_on(
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
