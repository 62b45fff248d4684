//! The running test binary started again as a child process, to be killed with
//! SIGKILL at a chosen moment: the crash tests of the embedded store and the engine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use std::time::Duration;

/// A child process running one ignored test of the current test binary.
#[derive(Debug)]
pub struct Child {
    process: std::process::Child,
    lines: Receiver<String>,
    reader: Option<JoinHandle<()>>,
}

impl Child {
    /// Runs the ignored test `test` (its full path, `--exact`) of the current test
    /// binary in a child process, with the environment variable `env` set to
    /// `value` (the test does its work only when it is set). Its stderr is
    /// inherited; its stdout lines arrive through [`Child::next_line`].
    pub fn spawn(test: &str, env: &str, value: impl AsRef<OsStr>) -> Child {
        let exe = std::env::current_exe().unwrap();
        let mut process = Command::new(exe)
            .args([
                test,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(env, value)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = process.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        Child {
            process,
            lines,
            reader: Some(reader),
        }
    }

    /// The next line the child printed; panics when it prints nothing for `timeout`.
    pub fn next_line(&self, timeout: Duration) -> String {
        self.lines
            .recv_timeout(timeout)
            .expect("the child stopped talking")
    }

    /// Kills the child (SIGKILL), waits for it to end, and returns the lines it
    /// printed that [`Child::next_line`] had not returned yet.
    pub fn kill(mut self) -> Vec<String> {
        self.process.kill().unwrap();
        self.process.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        self.lines.try_iter().collect()
    }
}

/// In the ignored test that [`Child::spawn`] runs: the value of `env` and a
/// runtime of one worker to do the child's work on; `None` when the test is
/// run any other way (it then does nothing).
pub fn child_work(env: &str) -> Option<(String, tokio::runtime::Runtime)> {
    let value = std::env::var(env).ok()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    Some((value, rt))
}

/// The next value of a cheap pseudo-random sequence (kill moments of crash tests).
pub fn next_seed(seed: u128) -> u128 {
    seed.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15
}
