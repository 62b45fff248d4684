//! `tern analyze contention FILE`: the [MC] write-contention model check of
//! an entity-group schema (crate `tern-contention`, format in docs/contention.md).

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::{Ctx, EXIT_OK};

/// Exit code: `tern analyze contention` found the schema UNSAFE.
pub const EXIT_CONTENTION: u8 = 10;

/// `tern analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// The analysis.
    #[command(subcommand)]
    pub what: Analysis,
}

/// The analyses.
#[derive(Debug, Subcommand)]
pub enum Analysis {
    /// Check that no entity group can be written by two users ([MC]); exit 10 if UNSAFE.
    Contention(ContentionArgs),
}

/// `tern analyze contention`.
#[derive(Debug, Args)]
pub struct ContentionArgs {
    /// The schema and update expressions (`.mc`, see docs/contention.md).
    pub file: std::path::PathBuf,
}

/// Runs `tern analyze ...`.
///
/// # Errors
/// The file cannot be read or has an error (named as file:line:col).
pub fn run(ctx: &Ctx, args: &AnalyzeArgs) -> anyhow::Result<u8> {
    match &args.what {
        Analysis::Contention(a) => contention(ctx, a),
    }
}

fn contention(ctx: &Ctx, args: &ContentionArgs) -> anyhow::Result<u8> {
    let path = args.file.display();
    let src = std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {path}"))?;
    let g = tern_contention::parse(&src).map_err(|e| anyhow::anyhow!("{path}:{e}"))?;
    let report = tern_contention::analyze_grammar(&g);
    for w in &report.warnings {
        crate::errln!("warning: {path}:{w}");
    }
    if ctx.opt.json {
        crate::outln!("{}", tern_contention::render::json(&report));
    } else {
        crate::out!("{}", tern_contention::render::text(&g, &report));
    }
    if report.disagreement() {
        anyhow::bail!(
            "internal error: the finite and the symbolic checks disagree on {path}; please report it"
        );
    }
    Ok(match report.verdict {
        tern_contention::Verdict::Safe => EXIT_OK,
        tern_contention::Verdict::Unsafe => EXIT_CONTENTION,
    })
}
