//! The argument groups and value parsers the commands share (their own file: the
//! commands name them, and `opt.rs` names the commands' own arguments).

use clap::Args;

/// Options shared by `plan` and `up`. The default: run options as tern.toml
/// gives them, without command-line overrides (`tern status`, `tern sweep`).
#[derive(Debug, Args, Clone, Default)]
pub struct RunArgs {
    /// Apply migrations up to and including this number.
    #[arg(long, value_name = "N")]
    pub to: Option<u32>,
    /// Entities per batch and checkpoint (stages run inside the store: `run.pushdown_batch_size`).
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub batch_size: Option<usize>,
    /// At most this many entities per second.
    #[arg(long, value_name = "PER_SECOND", value_parser = positive_rate)]
    pub max_rate: Option<f64>,
    /// Run this many partitions of a stage at once in this process (stores
    /// with partitions: embedded, and the adapters that split kinds). 1 (the
    /// default): stages run unpartitioned, as one scan. See docs/workers.md.
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub workers: Option<usize>,
    /// Split each partitioned stage into this many partitions (default: 4
    /// per worker); with `--workers 1`, still partitions stages, so that
    /// `tern worker` processes elsewhere can share them.
    #[arg(long, value_name = "P", value_parser = at_least_one)]
    pub partitions: Option<usize>,
}

/// `tern lock`.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// Remove the lock if it has expired (its runner died).
    #[arg(long)]
    pub release: bool,
    /// With --release: remove it even if it has not expired. The runner holding
    /// it stops at its next checkpoint (fencing); use only when it is known dead.
    #[arg(long, requires = "release")]
    pub force: bool,
}

/// A count of at least 1 (`--batch-size 0` is refused, as `batch_size = 0` in tern.toml is).
pub(crate) fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A rate above 0 (leave the option out for no limit).
pub(crate) fn positive_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        Ok(_) => Err("must be a number above 0 (leave --max-rate out for no limit)".to_owned()),
        Err(e) => Err(e.to_string()),
    }
}
