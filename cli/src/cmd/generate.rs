//! `tern completions SHELL` and `tern man`: files generated from the clap
//! definitions of the very binary that prints them, so they never drift from it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

/// `tern completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `tern man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `tern.1` and one `tern-COMMAND.1` per command into this folder
    /// (created if missing) instead of printing `tern.1` on stdout.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script of `args.shell` for `cli` (tern's `Opt::command()`) on stdout.
///
/// # Errors
/// When stdout cannot be written.
pub fn completions(args: &CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<u8> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "tern", &mut out);
    write_stdout(&out)
}

/// Prints the man page of `cmd` (tern's `Opt::command()`) on stdout, or writes every
/// page into `args.dir`.
///
/// # Errors
/// When the folder or a page cannot be written, naming it.
pub fn man(args: &ManArgs, cmd: clap::Command) -> anyhow::Result<u8> {
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            Ok(crate::EXIT_OK)
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("cannot render the man page")?;
            write_stdout(&out)
        }
    }
}

fn write_stdout(bytes: &[u8]) -> anyhow::Result<u8> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(crate::EXIT_OK),
        // `tern man | head`: a closed pipe is the reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(crate::EXIT_OK),
        Err(e) => Err(e).context("cannot write to stdout"),
    }
}
