//! Writing to standard output and standard error without ever panicking
//! (`println!` panics when stdout is a closed pipe or a full disk).
//!
//! Every report line goes through [`outln!`](crate::outln) / [`out!`](crate::out),
//! every note through [`errln!`](crate::errln). A failed write to stdout is
//! remembered (the first one) and later output is dropped; the command itself
//! runs to its end (a migration is never stopped half-way because its reader
//! went away). [`finish`] then decides the exit:
//! - a **closed pipe** (`tern status | head -1`): quiet, the command's own exit code;
//! - **any other error** (`tern status > /dev/full`): `error: cannot write to
//!   standard output ...` and exit 1, so a cut-short report never reads as success.
//!
//! Standard error is best effort: a note that cannot be written is dropped
//! (there is nowhere left to say so).

use std::fmt;
use std::io::Write as _;
use std::sync::Mutex;

/// The first failed write to stdout, if any.
static FAILED: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Writes `args` to stdout, unless an earlier write failed (then nothing).
pub fn write_out(args: fmt::Arguments<'_>) {
    let Ok(mut failed) = FAILED.lock() else {
        return;
    };
    if failed.is_some() {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        *failed = Some(e);
    }
}

/// Writes `args` to stderr, dropping it if stderr cannot be written.
pub fn write_err(args: fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Flushes stdout and returns the first write error, if any.
pub fn take_error() -> Option<std::io::Error> {
    let flushed = std::io::stdout().lock().flush();
    let mut failed = FAILED.lock().ok()?;
    if failed.is_none()
        && let Err(e) = flushed
    {
        *failed = Some(e);
    }
    failed.take()
}

/// Whether `e` means the reader of stdout went away (`| head`).
pub fn is_closed_pipe(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// The exit code once the command returned `code`: its own when stdout took
/// everything or its reader closed the pipe; 1 (with the reason on stderr)
/// when a write failed otherwise.
pub fn finish(code: u8) -> u8 {
    match take_error() {
        None => code,
        Some(e) if is_closed_pipe(&e) => code,
        Some(e) => {
            let outcome = if code == crate::EXIT_OK {
                "the command itself completed".to_owned()
            } else {
                format!("the command itself ended with exit code {code}")
            };
            write_err(format_args!(
                "error: cannot write to standard output: {e}; its report is incomplete ({outcome}; `tern status` shows the store's state)\n"
            ));
            crate::EXIT_ERROR
        }
    }
}

/// `println!` to stdout that never panics (see the module docs).
#[macro_export]
macro_rules! outln {
    () => { $crate::output::write_out(format_args!("\n")) };
    ($($arg:tt)*) => {
        $crate::output::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` to stdout that never panics (see the module docs).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::output::write_out(format_args!($($arg)*)) };
}

/// `eprintln!` that never panics: a note stderr cannot take is dropped.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics.
#[macro_export]
macro_rules! errout {
    ($($arg:tt)*) => { $crate::output::write_err(format_args!($($arg)*)) };
}
