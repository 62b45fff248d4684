//! The `tern` binary: parses the command line and runs it.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let opt = tern_cli::opt::Opt::parse();
    tern_cli::run(opt).await
}
