//! `tern advise MODEL WORKLOAD`: the [NoSE] schema advisor (crate `tern-advisor`).

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use tern_advisor::{Model, Options, Workload, advise, migration, render};

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
    /// Write the migration that builds the recommended column families (and their CQL) into DIR.
    #[arg(long, value_name = "DIR")]
    pub emit_migration: Option<PathBuf>,
}

/// Runs `tern advise`.
///
/// # Errors
/// Unreadable or invalid inputs, no solution, or unwritable output.
pub fn run(args: &AdviseArgs) -> anyhow::Result<u8> {
    let read = |p: &PathBuf| {
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let model = Model::parse(&args.model.display().to_string(), &read(&args.model)?)?;
    let workload = Workload::parse(
        &args.workload.display().to_string(),
        &read(&args.workload)?,
        &model,
    )?;
    let opts = Options {
        mix: args.mix.clone(),
        space_budget: args.space_budget,
        time_limit: args.time_limit,
        ..Options::default()
    };
    let rec = advise(&model, &workload, &opts)?;
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
    if let Some(dir) = &args.emit_migration {
        let files = migration::emit(&model, &rec, dir)?;
        for f in files {
            eprintln!("wrote {}", f.display());
        }
    }
    Ok(EXIT_OK)
}
