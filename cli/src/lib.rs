//! The `tern` command line: a thin layer over `tern-core` and the adapters.
//!
//! `main` parses [`opt::Opt`] and calls [`run`], which returns the process exit
//! code. Library errors carry their exit code ([`tern_core::migrate::MigrateError::exit_code`]).

pub mod cmd;
pub mod config;
pub mod connect;
pub mod credentials;
pub mod logging;
pub mod metrics;
pub mod opt;
pub mod output;
pub mod progress;
pub mod signals;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::CommandFactory;
use tern_core::migrate::{
    CancelFlag, LeaseOptions, MigrateError, MigrationSet, Migrator, RunOptions,
};
use tern_core::store::{ErrorKind, Store};

use crate::config::Settings;
use crate::opt::{Command, Opt};
use crate::progress::{CliProgress, Mode};

/// The version `tern --version` prints: the package's and the commit it was
/// built from (cli/build.rs; "commit unknown" outside a git checkout).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TERN_BUILD_COMMIT_INFO"),
    ")"
);

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: an error.
pub const EXIT_ERROR: u8 = tern_core::migrate::error::EXIT_ERROR;
/// Exit code: entities below their kind's version (`tern verify`).
pub const EXIT_BEHIND: u8 = 1;

/// The context of one invocation.
pub struct Ctx {
    /// The arguments.
    pub opt: Opt,
    /// The resolved settings.
    pub settings: Settings,
    /// Set by Ctrl-C.
    pub cancel: CancelFlag,
}

impl Ctx {
    /// The store URL, or a clear error saying where to give one.
    ///
    /// # Errors
    /// When no source names a store.
    pub fn store_url(&self) -> anyhow::Result<&str> {
        self.settings.store_url.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "no store given: pass --store URL, set TERN_STORE_URL, or write store_url = \"...\" in {}",
                self.opt.config.display()
            )
        })
    }

    /// Opens the store.
    ///
    /// # Errors
    /// When none is configured or it cannot be opened.
    pub async fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        let create = self.opt.create_store || matches!(self.opt.command, Command::Import(_));
        // The commands whose output users take as the truth about the data
        // check an embedded file's page checksums first (issue 34 item 1).
        let check = matches!(
            self.opt.command,
            Command::Verify | Command::Export(_) | Command::Import(_)
        );
        connect::open_secure(
            self.store_url()?,
            self.settings.store_password.as_ref(),
            &self.settings.tls,
            create,
            check,
        )
        .await
    }

    /// Opens the store at `url` (not the project's: `tern advise --calibrate/--execute URL`)
    /// the way [`Ctx::store`] opens the project's, with the password and `[tls]` files given
    /// apart from the URL; a missing embedded store is created only with `--create-store`.
    ///
    /// # Errors
    /// As [`Ctx::store`].
    pub async fn store_at(&self, url: &str) -> anyhow::Result<Arc<dyn Store>> {
        crate::credentials::warn_if_password_in(url);
        connect::open_secure(
            url,
            self.settings.store_password.as_ref(),
            &self.settings.tls,
            self.opt.create_store,
            false,
        )
        .await
    }

    /// Opens the store, waiting up to `wait` while another process has it
    /// (the embedded store admits one process at a time).
    ///
    /// # Errors
    /// As [`Ctx::store`], once the wait is over.
    pub async fn store_waiting(
        &self,
        wait: Option<std::time::Duration>,
    ) -> anyhow::Result<Arc<dyn Store>> {
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        loop {
            match self.store().await {
                Err(e)
                    if exit_code_of(&e) == EXIT_LOCKED
                        && deadline.is_some_and(|d| tokio::time::Instant::now() < d) =>
                {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                other => return other,
            }
        }
    }

    /// After a command that may have changed tern's state document: where the
    /// store is a Redis Cluster with tern's server module on its masters, sends
    /// them the state ([`connect::push_module_spec`]). When that fails after
    /// `result` succeeded, the command fails with what to do; after a failed
    /// command the sending's failure is only logged (the command's error is the
    /// one to show).
    ///
    /// # Errors
    /// `result`'s error, or the sending's after a success.
    pub async fn with_module_spec(&self, result: anyhow::Result<u8>) -> anyhow::Result<u8> {
        let Ok(store_url) = self.store_url() else {
            return result;
        };
        if !matches!(
            tern_core::store::url::scheme(store_url).as_deref(),
            Some("redis" | "rediss")
        ) {
            return result;
        }
        let pushed = match connect::full_url(
            store_url,
            self.settings.store_password.as_ref(),
            &self.settings.tls,
        ) {
            Ok(full) => connect::push_module_spec(&full).await,
            Err(e) => Err(e),
        };
        match (pushed, result) {
            (Ok(0), result) => result,
            (Ok(masters), result) => {
                tracing::info!(masters, "tern's state sent to the module on every master");
                result
            }
            (Err(e), Ok(_)) => Err(e.context(
                "the command completed, but tern's state could not be sent to every master of \
                 the cluster, whose module refuses or serves unmigrated the keys of a master \
                 that has not got it: run the command again once every master answers (it \
                 sends the state again)",
            )),
            (Err(e), Err(err)) => {
                tracing::warn!(error = %render_error(&e), "tern's state could not be sent to every master of the cluster");
                Err(err)
            }
        }
    }

    /// Loads the migrations folder.
    ///
    /// # Errors
    /// A missing folder, bad file names, parse errors.
    pub fn migrations(&self) -> anyhow::Result<MigrationSet> {
        Ok(MigrationSet::load_dir(&self.settings.migrations_dir)?)
    }

    /// The progress mode.
    pub fn progress_mode(&self) -> Mode {
        Mode::detect(self.opt.quiet || self.opt.json)
    }

    /// The batch options: the settings with the command line's `overrides`.
    pub fn run_options(&self, overrides: &opt::RunArgs) -> RunOptions {
        RunOptions {
            batch_size: overrides
                .batch_size
                .unwrap_or(self.settings.batch_size)
                .max(1),
            pushdown_batch_size: self.settings.pushdown_batch_size,
            max_rate: overrides
                .max_rate
                .or(self.settings.max_rate)
                .filter(|r| *r > 0.0),
            census_passes: self.settings.census_passes,
            workers: overrides.workers.unwrap_or(1),
            partitions: overrides.partitions,
            // The total costs a count before each stage: only worth it for a
            // progress bar, or the metrics' lag behind the estimate.
            estimate_totals: self.progress_mode() == Mode::Bar || self.opt.metrics_addr.is_some(),
            ..RunOptions::default()
        }
    }

    /// A migrator over `store` with the settings and `overrides`.
    pub fn migrator(
        &self,
        store: Arc<dyn Store>,
        set: MigrationSet,
        overrides: &opt::RunArgs,
    ) -> Migrator {
        Migrator::new(store, set)
            .with_run_options(self.run_options(overrides))
            .with_lease_options(LeaseOptions {
                ttl: self.settings.lease_ttl,
                ..LeaseOptions::default()
            })
            .with_progress(Arc::new(CliProgress::new(self.progress_mode())))
            .with_cancel(self.cancel.clone())
    }
}

/// Runs one invocation and returns the exit code. Errors are printed here.
pub async fn run(opt: Opt) -> ExitCode {
    let metrics = logging::init(opt.verbose, opt.log_format, opt.metrics_addr);
    // Generated from the command line's definitions: no project, no store.
    let generated = match &opt.command {
        Command::Completions(args) => Some(cmd::generate::completions(args, Opt::command())),
        Command::Man(args) => Some(cmd::generate::man(args, Opt::command())),
        _ => None,
    };
    if let Some(result) = generated {
        return finish(result);
    }
    if let (Some(addr), Some(metrics)) = (opt.metrics_addr, metrics)
        && let Err(e) = metrics::serve(addr, metrics).await
    {
        return finish(Err(e));
    }
    let cancel = CancelFlag::new();
    signals::watch(cancel.clone());
    let result = match config::resolve(&opt) {
        Ok(settings) => {
            let ctx = Ctx {
                opt,
                settings,
                cancel,
            };
            dispatch(&ctx).await
        }
        Err(e) => Err(e),
    };
    finish(result)
}

/// The exit code of a command's result, printing its error; a failed write to
/// stdout or stderr decides the code as `output::finish` says.
fn finish(result: anyhow::Result<u8>) -> ExitCode {
    let code = match result {
        Ok(code) => code,
        Err(err) => {
            crate::errln!("error: {}", render_error(&err));
            exit_code_of(&err)
        }
    };
    ExitCode::from(output::finish(code))
}

/// The error and its causes on one line, `outer: cause: cause`, as they are:
/// every layer's message describes that layer only, so nothing repeats. Empty
/// messages are skipped.
pub fn render_error(err: &anyhow::Error) -> String {
    join_messages(err.chain())
}

/// [`render_error`] for any error: its message and those of its sources.
pub fn render_chain(err: &(dyn std::error::Error + 'static)) -> String {
    join_messages(std::iter::successors(Some(err), |e| e.source()))
}

fn join_messages<'a>(chain: impl Iterator<Item = &'a (dyn std::error::Error + 'static)>) -> String {
    let mut out = String::new();
    for cause in chain {
        let text = cause.to_string();
        if text.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Exit code: the lock is held by another runner (or the embedded store is open in another process).
pub const EXIT_LOCKED: u8 = tern_core::migrate::error::EXIT_LOCKED;
/// Exit code: an unsafe move/copy (`check`, `plan`, and `up` without `--force-unsafe`).
pub const EXIT_UNSAFE: u8 = tern_core::migrate::error::EXIT_UNSAFE;

/// The exit code for an error: the library's own code where it has one; a
/// store in use by another process counts as a held lock.
pub fn exit_code_of(err: &anyhow::Error) -> u8 {
    for e in err.chain() {
        if let Some(m) = e.downcast_ref::<MigrateError>() {
            return m.exit_code();
        }
        // `LazyError::Migrate` is transparent: its MigrateError is not in the chain.
        if let Some(l) = e.downcast_ref::<tern_core::lazy::LazyError>() {
            return l.exit_code();
        }
        if e.downcast_ref::<tern_core::store::Error>()
            .is_some_and(|s| s.kind() == ErrorKind::Busy)
        {
            return EXIT_LOCKED;
        }
    }
    EXIT_ERROR
}

async fn dispatch(ctx: &Ctx) -> anyhow::Result<u8> {
    match &ctx.opt.command {
        Command::Init(args) => cmd::project::init(ctx, args),
        Command::New(args) => cmd::project::new(ctx, args),
        Command::Check(args) => cmd::project::check(ctx, args).await,
        Command::Plan(args) => cmd::apply::plan(ctx, &args.run, args.samples).await,
        Command::Up(args) => ctx.with_module_spec(cmd::apply::up(ctx, args).await).await,
        Command::Worker(args) => cmd::apply::worker(ctx, args).await,
        Command::Status(args) => cmd::info::status(ctx, args.exact).await,
        Command::Sweep(args) => {
            ctx.with_module_spec(cmd::sweep::sweep(ctx, args).await)
                .await
        }
        Command::Gc(args) => ctx.with_module_spec(cmd::sweep::gc(ctx, args).await).await,
        Command::Verify => cmd::info::verify(ctx).await,
        Command::Lock(args) => cmd::info::lock(ctx, args).await,
        Command::Import(args) => cmd::data::import(ctx, args).await,
        Command::Export(args) => cmd::data::export(ctx, args).await.context("export failed"),
        Command::Analyze(args) => cmd::analyze::run(ctx, args).await,
        Command::Advise(args) => cmd::advise::run(args, ctx).await,
        Command::Abandon => ctx.with_module_spec(cmd::abandon::abandon(ctx).await).await,
        Command::Completions(args) => cmd::generate::completions(args, Opt::command()),
        Command::Man(args) => cmd::generate::man(args, Opt::command()),
    }
}
