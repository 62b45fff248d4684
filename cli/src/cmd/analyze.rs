//! `tern analyze contention FILE`: the [MC] write-contention model check of
//! an entity-group schema (crate `tern-contention`, format in docs/contention.md).
//!
//! The check runs on a blocking thread and polls the Ctrl-C/SIGTERM flag;
//! this task waits for it or for the signal, so a signal stops the command
//! at once (exit 130) even in a phase that does not poll (reading, parsing).

use std::path::Path;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use tern_contention::{Grammar, Limits, Report, Stop};

use crate::{Ctx, EXIT_ERROR, EXIT_OK};

/// Exit code: `tern analyze contention` found the schema UNSAFE.
pub const EXIT_CONTENTION: u8 = 10;
/// Exit code: stopped by Ctrl-C or SIGTERM.
pub const EXIT_INTERRUPTED: u8 = tern_core::migrate::error::EXIT_INTERRUPTED;

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
    /// Stop the optional phases (the suggested alternative, the finite
    /// cross-check) after this many seconds, keeping what they have, with a
    /// note; if the verdict itself is not reached by then, no verdict (exit 1).
    #[arg(long, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
}

/// Runs `tern analyze ...`.
///
/// # Errors
/// The file cannot be read or has an error (named as file:line:col).
pub async fn run(ctx: &Ctx, args: &AnalyzeArgs) -> anyhow::Result<u8> {
    match &args.what {
        Analysis::Contention(a) => contention(ctx, a).await,
    }
}

/// Why the command ends without a report.
enum Failure {
    /// Bad input: the message names `FILE:LINE:COL` where it can.
    Input {
        message: String,
        line: Option<u32>,
        col: Option<u32>,
    },
    /// Ctrl-C or SIGTERM.
    Interrupted,
    /// The time limit passed before the verdict.
    NoVerdict,
}

async fn contention(ctx: &Ctx, args: &ContentionArgs) -> anyhow::Result<u8> {
    crate::signals::set_messages(
        "stopping the analysis",
        "stopped; the analysis gave no verdict",
    );
    let limit = match args.time_limit {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            anyhow::bail!("--time-limit takes a positive number of seconds, found {s}")
        }
        Some(s) => Some(Duration::from_secs_f64(s.min(1e9))),
        None => None,
    };
    let file = args.file.clone();
    let cancel = ctx.cancel.clone();
    let deadline = limit.map(|l| Instant::now() + l);
    // A thread of its own (not tokio's blocking pool, which the runtime waits
    // for on exit): after a signal the command returns at once.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("tern-contention".into())
        .spawn(move || {
            let is_cancelled = || cancel.is_cancelled();
            let limits = Limits::none()
                .with_cancel(&is_cancelled)
                .with_deadline(deadline);
            let _ = tx.send(check(&file, &limits));
        })
        .map_err(|e| anyhow::anyhow!("cannot start the analysis: {e}"))?;
    // Wait for the check, or for a signal (which a non-polling phase would not see).
    let mut rx = std::pin::pin!(rx);
    let result = loop {
        tokio::select! {
            r = &mut rx => break r.map_err(|_| anyhow::anyhow!("the analysis failed"))?,
            () = tokio::time::sleep(Duration::from_millis(50)) => {
                if ctx.cancel.is_cancelled() {
                    break Err(Failure::Interrupted);
                }
            }
        }
    };
    let path = args.file.display().to_string();
    match result {
        Ok((g, report)) => Ok(print_report(ctx, &path, &g, &report)?),
        Err(f) => fail(ctx, &path, f),
    }
}

/// Reads, parses and analyses the file.
fn check(file: &Path, limits: &Limits<'_>) -> Result<(Grammar, Report), Failure> {
    let src = read(file)?;
    let g = tern_contention::parse(&src).map_err(|e| Failure::Input {
        message: format!("{}:{e}", file.display()),
        line: Some(e.span.line),
        col: Some(e.span.col),
    })?;
    match tern_contention::analyze_with(&g, limits) {
        Ok(r) => Ok((g, r)),
        Err(Stop::Cancelled) => Err(Failure::Interrupted),
        Err(Stop::TimeLimit) => Err(Failure::NoVerdict),
    }
}

/// The file as text: UTF-8, a leading byte-order mark dropped; a byte that
/// is not UTF-8 is named by line and column.
fn read(file: &Path) -> Result<String, Failure> {
    let path = file.display();
    let bytes = std::fs::read(file).map_err(|e| Failure::Input {
        message: format!("cannot read {path}: {e}"),
        line: None,
        col: None,
    })?;
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match std::str::from_utf8(body) {
        Ok(s) => Ok(s.to_owned()),
        Err(e) => {
            let good = &body[..e.valid_up_to()];
            let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
            let start = good.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let col = String::from_utf8_lossy(&good[start..]).chars().count() + 1;
            let byte = body.get(e.valid_up_to()).copied().unwrap_or(0);
            let (line, col) = (
                u32::try_from(line).unwrap_or(u32::MAX),
                u32::try_from(col).unwrap_or(u32::MAX),
            );
            Err(Failure::Input {
                message: format!(
                    "{path}:{line}:{col}: the file is not UTF-8 (byte 0x{byte:02X}); save it as UTF-8"
                ),
                line: Some(line),
                col: Some(col),
            })
        }
    }
}

fn print_report(ctx: &Ctx, path: &str, g: &Grammar, report: &Report) -> anyhow::Result<u8> {
    for w in &report.warnings {
        crate::errln!("warning: {path}:{w}");
    }
    if ctx.opt.json {
        crate::outln!("{}", tern_contention::render::json(report));
    } else {
        crate::out!("{}", tern_contention::render::text(g, report));
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

/// Reports a failure: a message on stderr, and with `--json` also a JSON
/// object on stdout (`error` with `kind`, `message`, `file`, `line`, `col`,
/// and `exit_code`). Returns the exit code.
fn fail(ctx: &Ctx, path: &str, f: Failure) -> anyhow::Result<u8> {
    let (kind, message, line, col, code) = match f {
        Failure::Input { message, line, col } => ("input", message, line, col, EXIT_ERROR),
        Failure::Interrupted => (
            "interrupted",
            format!("interrupted: the analysis of {path} stopped before a verdict"),
            None,
            None,
            EXIT_INTERRUPTED,
        ),
        Failure::NoVerdict => (
            "time-limit",
            format!(
                "no verdict for {path} within the time limit: the symbolic check did not finish; raise --time-limit"
            ),
            None,
            None,
            EXIT_ERROR,
        ),
    };
    if ctx.opt.json {
        let v = serde_json::json!({
            "error": {"kind": kind, "message": message, "file": path, "line": line, "col": col},
            "exit_code": code,
        });
        crate::outln!("{v}");
    }
    crate::errln!("error: {message}");
    Ok(code)
}
