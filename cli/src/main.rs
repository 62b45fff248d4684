//! The `tern` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc instead of glibc's malloc, whose per-thread arenas (one per tokio
/// blocking thread of the embedded store) keep what they once held: a 1M-entity
/// move/copy peaked at about 500 MB with them (docs/benchmarks.md). The
/// default feature `mimalloc`; without it, the system allocator.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    // redb panics on some corrupted files; the embedded store turns those
    // panics into a clear error, and this keeps their raw message off stderr.
    tern_core::store::embedded::quiet_panic_hook();
    // `tern help --help` means help about help: the main help (clap would exit 2).
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.len() == 3 && args[1] == "help" && (args[2] == "--help" || args[2] == "-h") {
        args.truncate(1);
        args.push("--help".into());
    }
    let opt = tern_cli::opt::Opt::parse_from(args);
    tern_cli::run(opt).await
}
