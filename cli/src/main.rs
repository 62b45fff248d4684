//! The `tern` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    // redb panics on some corrupted files; the embedded store turns those
    // panics into a clear error, and this keeps their raw message off stderr.
    tern_core::store::embedded::quiet_panic_hook();
    let opt = tern_cli::opt::Opt::parse();
    tern_cli::run(opt).await
}
