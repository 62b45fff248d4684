//! Command-line arguments, as written (resolved into [`crate::config::Settings`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod common;

pub use common::{LockArgs, RunArgs};
pub(crate) use common::{at_least_one, positive_rate};

/// tern: schema evolution for NoSQL stores.
///
/// Migrations live in `migrations/NNNN_name.tern`; the store is chosen by URL:
/// `embedded:PATH`, `mongodb://...`, `redis://...`, `cassandra://host:port/keyspace`.
///
/// Exit codes: 0 ok, 1 error, 2 usage, 3 lock held, 4 checksum mismatch,
/// 5 unsafe migration refused, 10 `analyze contention`: UNSAFE,
/// 130 interrupted (resumable).
#[derive(Debug, Parser)]
#[command(
    name = "tern",
    version = crate::VERSION,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Opt {
    /// The store URL (overrides TERN_STORE_URL and tern.toml).
    #[arg(long, global = true, value_name = "URL")]
    pub store: Option<String>,

    /// A file holding the store's password (instead of writing it in the URL,
    /// where the process list shows it); over TERN_STORE_PASSWORD and
    /// `password_file` in tern.toml.
    #[arg(long, global = true, value_name = "FILE")]
    pub store_password_file: Option<PathBuf>,

    /// The project file.
    #[arg(long, global = true, value_name = "FILE", default_value = "tern.toml")]
    pub config: PathBuf,

    /// The migrations folder (default: `migrations` beside the project file).
    #[arg(long, global = true, value_name = "DIR")]
    pub migrations: Option<PathBuf>,

    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,

    /// More log output (-v info, -vv debug); logs go to stderr.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// No progress bar or notes, only results and errors.
    #[arg(short, long, global = true)]
    pub quiet: bool,

    /// The format of the log lines on stderr: `text`, or `json` (one object a
    /// line, with the migration, stage and batch spans).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    pub log_format: crate::logging::LogFormat,

    /// Serve Prometheus metrics of `tern up` and `tern sweep` at
    /// http://ADDR/metrics while they run (e.g. 127.0.0.1:9464).
    #[arg(long, global = true, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// Create the embedded store file if it does not exist (without it, only
    /// `tern import` creates one: a mistyped path is an error, not a new store).
    #[arg(long, global = true)]
    pub create_store: bool,

    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create tern.toml and a migrations folder.
    Init(InitArgs),
    /// Create the next migration file, `migrations/NNNN_NAME.tern`.
    New(NewArgs),
    /// Parse and validate migrations; classify statements; run the move/copy safety check against the store.
    Check(CheckArgs),
    /// Show what pending migrations would change, without writing (a dry run).
    Plan(PlanArgs),
    /// Apply pending migrations in checkpointed, version-scoped batches.
    Up(UpArgs),
    /// Help a partitioned `tern up` or `tern sweep` from any host: claim
    /// unfinished partitions (a dead worker's after its lease expires); run
    /// `tern up` when no runner holds the lock. Exits once no migration is
    /// pending and no sweep runs. See docs/workers.md.
    Worker(WorkerArgs),
    /// Show applied and pending migrations, kind versions, lazy migrations and the lock.
    Status(crate::cmd::sweep::StatusArgs),
    /// Complete pending lazy migrations: migrate the remaining stale entities while clients work.
    Sweep(crate::cmd::sweep::SweepArgs),
    /// Retire the specs of completed lazy migrations.
    Gc(crate::cmd::sweep::GcArgs),
    /// Count entities per kind per version and report any below their kind's version.
    Verify,
    /// Show the migration lock; release it once expired.
    Lock(LockArgs),
    /// Load entities from a JSON Lines file (`-` for stdin).
    Import(ImportArgs),
    /// Write entities as JSON Lines, sorted by kind then id.
    Export(ExportArgs),
    /// Static analyses of a schema: `analyze contention FILE` ([MC] write contention).
    Analyze(crate::cmd::analyze::AnalyzeArgs),
    /// Recommend column families for a weighted workload ([NoSE]); no store needed.
    Advise(crate::cmd::advise::AdviseArgs),
    /// Drop the record of an interrupted migration that wrote nothing (refused once it has).
    Abandon,
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions(crate::cmd::generate::CompletionsArgs),
    /// Print the man page (roff), or write one page per command into a folder.
    Man(crate::cmd::generate::ManArgs),
}

/// `tern init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The project folder to create or complete.
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The store URL to write into tern.toml.
    #[arg(
        long = "with-store",
        value_name = "URL",
        default_value = "embedded:tern.redb"
    )]
    pub with_store: String,
}

/// `tern new`.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The migration's name: letters, digits, `_` and `-`.
    pub name: String,
}

/// `tern check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Only parse and validate; do not connect to the store.
    #[arg(long)]
    pub offline: bool,
}

/// `tern plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Batch and range options.
    #[command(flatten)]
    pub run: RunArgs,
    /// Sample before/after entities to show per kind.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub samples: usize,
}

/// `tern up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Batch and range options.
    #[command(flatten)]
    pub run: RunArgs,
    /// Show what would change instead of applying it (same as `tern plan`).
    #[arg(long)]
    pub dry_run: bool,
    /// Wait up to this many seconds for a lock held by another runner.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "600")]
    pub wait: Option<u64>,
    /// Run a move/copy even though the safety check found targets written by
    /// sources with different values (the greatest source key wins).
    #[arg(long)]
    pub force_unsafe: bool,
}

/// `tern worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Batch, worker and partition options (batch size, rate and workers also
    /// for the partitions of a sweep it joins).
    #[command(flatten)]
    pub run: RunArgs,
    /// When no partitioned `tern sweep` runs yet, wait up to this many seconds
    /// for one to join (workers started beside the sweep, as a Kubernetes Job's
    /// pods are); 0: join only a sweep already running.
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    pub wait_for_sweep: u64,
}

/// `tern import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The JSON Lines file, one `{"kind", "id", "version", "value"}` a line; `-` for stdin.
    pub file: PathBuf,
    /// Entities per write batch.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = at_least_one)]
    pub batch_size: usize,
    /// Skip the file's first line of tern's state (kind versions, ledger): import
    /// the entities alone, checked against this store's versions.
    #[arg(long)]
    pub no_state: bool,
}

/// `tern export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The kinds to export (default: all).
    pub kinds: Vec<String>,
    /// Write to this file instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Leave out the first line of tern's state (kind versions, ledger): the
    /// entities alone, as earlier exports (not a backup of a migrated store).
    /// An export of named kinds never has it.
    #[arg(long)]
    pub no_state: bool,
    /// Memory for sorting a kind on a store that does not scan in id order
    /// (Redis, MongoDB, Cassandra), in MiB; past it the sort goes through
    /// temporary files in TMPDIR.
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub sort_memory: u64,
}
