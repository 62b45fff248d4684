//! Valkey servers with the module loaded, started by the tests themselves on
//! 127.0.0.1 (ports 6390-6399 for single servers, 7101-7106 for the cluster),
//! stopped when dropped. Where Valkey or the built module cannot be had, a test
//! reports itself skipped with the reason (never silently).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, unreachable_pub)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use tern_core::store::Store;

/// The `valkey-server` binary (`TERN_VALKEY_SERVER`, else on the PATH).
pub fn valkey_server() -> Result<PathBuf, String> {
    let bin = std::env::var_os("TERN_VALKEY_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("valkey-server"));
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if String::from_utf8_lossy(&o.stdout).contains("v=8") => Ok(bin),
        Ok(o) => Err(format!(
            "{} is not Valkey 8 ({}): install it with scripts/servers.sh install valkey",
            bin.display(),
            String::from_utf8_lossy(&o.stdout).trim()
        )),
        Err(_) => Err(format!(
            "{} is not installed: scripts/servers.sh install valkey (Debian's bookworm-backports)",
            bin.display()
        )),
    }
}

/// The module built by cargo beside this test binary (`TERN_REDIS_MODULE` overrides).
pub fn module_path() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("TERN_REDIS_MODULE") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let deps = exe.parent().ok_or("no parent of the test binary")?;
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        let p = dir.join("libtern_redis_module.so");
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!(
        "libtern_redis_module.so not found near {} (cargo build -p tern-redis-module)",
        exe.display()
    ))
}

/// Reports a skip of `test` with `reason`, the battery's way (counted by scripts/test.sh).
pub fn skip(backend: &str, test: &str, reason: &str) {
    tern_testkit::battery::report(backend, test, &format!("skipped: {reason}"));
}

static NEXT: AtomicU16 = AtomicU16::new(0);

/// A free port in 6390-6399 (each test process takes them in turn).
pub fn free_port() -> Option<u16> {
    for _ in 0..10 {
        let port = 6390 + NEXT.fetch_add(1, Ordering::SeqCst) % 10;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Some(port);
        }
    }
    None
}

/// One Valkey server of a test's own.
pub struct Valkey {
    /// Its port.
    pub port: u16,
    /// Its directory (AOF, RDB, log).
    pub dir: tempfile::TempDir,
    child: Option<Child>,
    args: Vec<String>,
    /// The module's argument (the tern store URL).
    pub module_arg: String,
}

impl Valkey {
    /// Starts a server with the module loaded (`module_arg`: the store URL),
    /// AOF on (fsync always) so restarts keep everything. `Err`: why it cannot run here.
    pub fn start(module_arg: &str, extra: &[&str]) -> Result<Valkey, String> {
        Self::start_with(Some(module_arg), extra)
    }

    /// The same server without the module (a benchmark's baseline).
    pub fn start_without_module(extra: &[&str]) -> Result<Valkey, String> {
        Self::start_with(None, extra)
    }

    /// A server with the module at `module` (not the one [`module_path`] finds):
    /// a benchmark's other build, side by side.
    pub fn start_module_at(
        module: &Path,
        module_arg: &str,
        extra: &[&str],
    ) -> Result<Valkey, String> {
        let mut with = vec![
            "--loadmodule",
            module.to_str().ok_or("the module's path is not UTF-8")?,
            module_arg,
        ];
        with.extend_from_slice(extra);
        let mut v = Self::start_with(None, &with)?;
        v.module_arg = module_arg.to_owned();
        Ok(v)
    }

    /// The server's process id (while it runs).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn start_with(module_arg: Option<&str>, extra: &[&str]) -> Result<Valkey, String> {
        let bin = valkey_server()?;
        let port = free_port().ok_or("no free port in 6390-6399")?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut args: Vec<String> = vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "always".into(),
            "--dir".into(),
            dir.path().display().to_string(),
            "--logfile".into(),
            "valkey.log".into(),
            "--enable-debug-command".into(),
            "local".into(),
        ];
        if let Some(arg) = module_arg {
            args.extend([
                "--loadmodule".into(),
                module_path()?.display().to_string(),
                arg.to_owned(),
            ]);
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let _ = bin;
        let mut v = Valkey {
            port,
            dir,
            child: None,
            args,
            module_arg: module_arg.unwrap_or("redis://127.0.0.1/").to_owned(),
        };
        v.spawn()?;
        Ok(v)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let bin = valkey_server()?;
        let child = Command::new(bin)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(mut c) = self.conn_once()
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(format!(
                    "valkey-server exited ({status}): {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        Err(format!(
            "valkey-server not ready after 20 s: {}",
            self.log_tail()
        ))
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("valkey.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn conn_once(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    /// A plain connection, or the driver's error.
    pub fn conn_checked(&self) -> redis::RedisResult<redis::Connection> {
        self.conn_once()
    }

    /// A plain connection (no tern code on the client side).
    pub fn conn(&self) -> redis::Connection {
        self.conn_once().unwrap()
    }

    /// The tern store URL of the data (the module's argument, on this port).
    pub fn store_url(&self) -> String {
        self.module_arg
            .replacen("127.0.0.1/", &format!("127.0.0.1:{}/", self.port), 1)
    }

    /// tern's store on this server, for `tern up` (the installer's side).
    pub async fn store(&self) -> Arc<dyn Store> {
        tern_redis::open(&self.store_url()).await.unwrap()
    }

    /// Kills the server (SIGKILL) and starts it again on the same directory.
    pub fn restart(&mut self) -> Result<(), String> {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.spawn()
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Valkey {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `tern up` of lazy migration scripts `(id, text)` on the server's store;
/// a failure panics with the error and the server's log (no retry: a failure
/// here is a finding, not noise to hide).
pub async fn up(v: &Valkey, scripts: &[(u32, &str)]) {
    let store = match tern_redis::open(&v.store_url()).await {
        Ok(s) => s,
        Err(e) => panic!("cannot open {}: {e}\n{}", v.store_url(), v.log_tail()),
    };
    if let Err(e) = tern_testkit::lazy::up(&store, scripts).await {
        panic!("tern up failed: {e}\n{}", v.log_tail());
    }
}
