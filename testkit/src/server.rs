//! A server process of a test's own on 127.0.0.1 (a redis-server with TLS or
//! an ACL file, a SecantusDB over TLS), started on a port the test chose and
//! stopped when the test drops it; [`redis_server`], the command line such a
//! redis-server starts from.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `redis-server` listening on 127.0.0.1:`port` only, without RDB snapshots,
/// working in `dir`: a server of a test's own, to which the test adds its
/// options before it starts it.
pub fn redis_server(port: u16, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", ""])
        .arg("--dir")
        .arg(dir);
    cmd
}

/// `secantusd-py` (the SecantusDB server of the MongoDB tests that start one
/// of their own), or why it cannot be found: `$TERN_SECANTUSD`, then the
/// virtualenv of `scripts/servers.sh` under `$TERN_STATE_DIR` (default
/// `.tern-servers` at the repository's root), then the `PATH`.
pub fn secantusd() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("TERN_SECANTUSD") {
        return Ok(PathBuf::from(path));
    }
    let state = std::env::var_os("TERN_STATE_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tern-servers"),
        PathBuf::from,
    );
    let venv = state.join("venv/bin/secantusd-py");
    if venv.exists() {
        return Ok(venv);
    }
    let on_path = Command::new("secantusd-py")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if on_path {
        return Ok(PathBuf::from("secantusd-py"));
    }
    Err(format!(
        "secantusd-py is neither at $TERN_SECANTUSD, nor in {}, nor on the PATH \
         (scripts/servers.sh install mongodb)",
        venv.display()
    ))
}

/// A running server process, stopped on drop (SIGTERM, then SIGKILL after 10 s).
#[derive(Debug)]
pub struct LocalServer {
    child: Child,
    /// Folders the server uses, removed after it stopped.
    dirs: Vec<tempfile::TempDir>,
}

impl LocalServer {
    /// Starts `cmd` (stdin, stdout and stderr to /dev/null) and waits up to
    /// `timeout` until it accepts connections on 127.0.0.1:`port`.
    ///
    /// Panics, naming the program and the port, when it cannot be started,
    /// when it exits first (the port is taken, or it refused an option: a
    /// redis-server built without TLS) or when it does not listen in time.
    pub fn start(cmd: &mut Command, port: u16, timeout: Duration) -> LocalServer {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
        let mut server = LocalServer {
            child,
            dirs: Vec::new(),
        };
        let deadline = Instant::now() + timeout;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!(
                    "{program} on port {port} exited ({status}): is the port taken, \
                     or did it refuse an option (TLS not built in)?"
                );
            }
            assert!(
                Instant::now() < deadline,
                "{program} did not listen on port {port} within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// This server, keeping `dir` until it is stopped.
    #[must_use]
    pub fn keeping(mut self, dir: tempfile::TempDir) -> LocalServer {
        self.dirs.push(dir);
        self
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
