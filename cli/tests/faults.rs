//! Issue 12, item 12: server faults mid-run. The `tern` binary talks to each
//! server through a fault-injecting proxy (`tern_integration_tests::fault_proxy`):
//! a dropped connection during `tern up` is retried or ends in a resumable
//! exit, and the rerun ends identical to an uninterrupted run; a runner cut
//! off longer than its lease stops writing, and a second runner completes the
//! migration with no double apply. A server that is not configured here is
//! reported skipped (see `cli/tests/servers.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Project, RELEASE2, RELEASE3, blog_lines};
use tern_integration_tests::fault_proxy::FaultProxy;

const USERS: usize = 60;
const POSTS: usize = 3;

/// The `127.0.0.1:PORT` of a store URL.
fn upstream(url: &str) -> SocketAddr {
    let start = url.find("127.0.0.1:").expect("a 127.0.0.1 URL");
    let rest = &url[start + "127.0.0.1:".len()..];
    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
    format!("127.0.0.1:{port}").parse().unwrap()
}

/// `url` pointing at `proxy` instead of its server.
fn through(url: &str, proxy: SocketAddr) -> String {
    url.replacen(&upstream(url).to_string(), &proxy.to_string(), 1)
}

fn setup(p: &Project) {
    p.write("data.jsonl", &blog_lines(USERS, POSTS));
    p.write("migrations/0001_release2.tern", RELEASE2);
    p.write("migrations/0002_release3.tern", RELEASE3);
}

/// The export after an uninterrupted run on the embedded store (the servers
/// test shows every server ends with the same export).
fn expected_export() -> String {
    let p = Project::new(5_000);
    setup(&p);
    p.ok(&["import", "data.jsonl"]);
    p.ok(&["up", "-q"]);
    p.ok(&["export"])
}

fn wait(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("tern did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// `url`, or `None` after saying that `what` is skipped and why.
fn or_skip(url: Result<String, String>, what: &str) -> Option<String> {
    url.map_err(|reason| eprintln!("skipped: {what}: {reason}"))
        .ok()
}

/// Runs `f` on a thread that may block (the `tern` binary runs to its end).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// `p` set up, and after `tern import data.jsonl` in it.
async fn set_up(p: Project) -> Project {
    setup(&p);
    blocking(move || {
        p.ok(&["import", "data.jsonl"]);
        p
    })
    .await
}

/// Starts `tern up -q --max-rate MAX_RATE` in `p`, its output piped.
fn spawn_up(p: &Project, max_rate: &str) -> Child {
    p.cmd(&["up", "-q", "--max-rate", max_rate])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Asserts a run on `backend` that met a fault ended without a panic, and,
/// if it failed, said it is resumable; returns its exit code.
fn survived_or_resumable(backend: &str, out: &Output) -> Option<i32> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(
        code.is_some() && code != Some(101),
        "{backend}: {code:?}\n{stderr}"
    );
    if code != Some(0) {
        assert!(
            stderr.contains("tern up") && stderr.contains("resum"),
            "{backend}: a failed run says it is resumable: {stderr}"
        );
    }
    code
}

/// Asserts `tern verify` passes in `p`, and returns the export.
fn verified_export(p: &Project) -> String {
    let verify: serde_json::Value = serde_json::from_str(&p.ok(&["verify", "--json"])).unwrap();
    assert_eq!(verify["ok"], true, "{verify}");
    p.ok(&["export"])
}

/// A dropped connection (twice) during `tern up`: retried, or a resumable
/// exit with a clear message; the rerun ends like an uninterrupted run.
async fn dropped_connection(backend: &str, url: Result<String, String>) {
    let Some(url) = or_skip(url, &format!("dropped connection on {backend}")) else {
        return;
    };
    let proxy = FaultProxy::start(upstream(&url)).await.unwrap();
    let proxied = through(&url, proxy.addr());
    let expected = blocking(expected_export).await;
    let p = set_up(Project::on(&proxied, 3_000)).await;
    let child = spawn_up(&p, "300");
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.drop_connections();
    tokio::time::sleep(Duration::from_millis(400)).await;
    proxy.drop_connections();
    let out = blocking(move || wait(child, Duration::from_secs(180))).await;
    let code = survived_or_resumable(backend, &out);
    let export = blocking(move || {
        p.ok(&["up", "-q", "--wait", "60"]);
        verified_export(&p)
    })
    .await;
    assert_eq!(
        export, expected,
        "{backend}: the rerun ends like an uninterrupted run"
    );
    eprintln!("dropped connection on {backend}: passed (first run exit {code:?})");
}

/// A runner cut off (blackholed) longer than its lease: a second runner takes
/// over and completes; the first, healed, writes nothing more and fails.
async fn cut_off_past_the_lease(backend: &str, url: Result<String, String>) {
    let Some(url) = or_skip(url, &format!("cut-off runner on {backend}")) else {
        return;
    };
    let proxy = FaultProxy::start(upstream(&url)).await.unwrap();
    let expected = blocking(expected_export).await;
    let a = Project::on(&through(&url, proxy.addr()), 1_500);
    setup(&a);
    let b = set_up(Project::on(&url, 1_500)).await;
    let first = spawn_up(&a, "200");
    tokio::time::sleep(Duration::from_millis(600)).await;
    proxy.blackhole();
    // Longer than the lease: the second runner waits it out and takes over.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let b = blocking(move || {
        b.ok(&["up", "-q", "--wait", "60"]);
        b
    })
    .await;
    proxy.heal();
    let out = blocking(move || wait(first, Duration::from_secs(180))).await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.code().is_some_and(|c| c != 0 && c != 101),
        "{backend}: the cut-off runner must not report success: {:?}\n{stderr}",
        out.status.code()
    );
    let export = blocking(move || {
        let status: serde_json::Value = serde_json::from_str(&b.ok(&["status", "--json"])).unwrap();
        assert!(status["running"].is_null(), "{status}");
        assert_eq!(status["migrations"][1]["state"], "applied", "{status}");
        verified_export(&b)
    })
    .await;
    assert_eq!(export, expected, "{backend}: no double apply, nothing lost");
    eprintln!("cut-off runner on {backend}: passed ({stderr})");
}

async fn redis_url() -> Result<String, String> {
    tern_integration_tests::redis::backend()
        .await
        .map(|b| b.fresh_url())
}

async fn mongodb_url() -> Result<String, String> {
    tern_integration_tests::mongodb::backend().await.map(|b| {
        let url = b.url_for(&tern_integration_tests::common::unique_name("tern_fault"));
        // Talk to the address given (the proxy), not the one the server reports.
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}directConnection=true")
    })
}

async fn cassandra_url() -> Result<String, String> {
    tern_integration_tests::cassandra::backend()
        .await
        .map(|b| b.fresh_url())
}

/// One test a row: `scenario(backend, url)` on a multi-threaded runtime.
macro_rules! fault_tests {
    ($($name:ident: $scenario:ident($backend:literal, $url:ident);)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            $scenario($backend, $url().await).await;
        }
    )*};
}

fault_tests! {
    a_dropped_connection_during_up_on_redis_is_retried_or_resumable: dropped_connection("redis", redis_url);
    a_dropped_connection_during_up_on_mongodb_is_retried_or_resumable: dropped_connection("mongodb", mongodb_url);
    a_dropped_connection_during_up_on_cassandra_is_retried_or_resumable: dropped_connection("cassandra", cassandra_url);
    a_runner_cut_off_past_its_lease_on_redis_stops_and_a_second_completes: cut_off_past_the_lease("redis", redis_url);
    a_runner_cut_off_past_its_lease_on_mongodb_stops_and_a_second_completes: cut_off_past_the_lease("mongodb", mongodb_url);
    a_runner_cut_off_past_its_lease_on_cassandra_stops_and_a_second_completes: cut_off_past_the_lease("cassandra", cassandra_url);
}

/// A server process of this test's own, on a free port, keeping its data in
/// a folder of its own so that a restart keeps it.
struct OwnServer {
    program: std::path::PathBuf,
    args: fn(u16, &std::path::Path) -> Vec<String>,
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl OwnServer {
    fn start(
        program: std::path::PathBuf,
        args: fn(u16, &std::path::Path) -> Vec<String>,
    ) -> Result<OwnServer, String> {
        let port = tern_integration_tests::common::free_port()?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let mut s = OwnServer {
            program,
            args,
            port,
            dir,
            child: None,
        };
        s.spawn()?;
        Ok(s)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let child = std::process::Command::new(&self.program)
            .args((self.args)(self.port, self.dir.path()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "{} cannot start here ({e}); `scripts/servers.sh install` installs it",
                    self.program.display()
                )
            })?;
        self.child = Some(child);
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if start.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "{} did not start within 60 s",
                    self.program.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Kills the server process, if it runs.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server (as a crash would) and starts it again on the same port.
    fn crash_and_restart(&mut self) -> Result<(), String> {
        self.kill();
        std::thread::sleep(Duration::from_millis(300));
        self.spawn()
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A restart of `server` (kill -9, start again) during `tern up` on `url`:
/// the run survives or ends resumable; the rerun ends like an uninterrupted run.
fn restart_during_up(backend: &str, mut server: OwnServer, url: &str) {
    let expected = expected_export();
    let p = Project::on(url, 3_000);
    setup(&p);
    p.ok(&["import", "data.jsonl"]);
    let child = spawn_up(&p, "300");
    std::thread::sleep(Duration::from_millis(500));
    server.crash_and_restart().unwrap();
    let out = wait(child, Duration::from_secs(180));
    let code = survived_or_resumable(backend, &out);
    p.ok(&["up", "-q", "--wait", "60"]);
    assert_eq!(verified_export(&p), expected, "{backend}");
    eprintln!("{backend} restart: passed (first run exit {code:?})");
}

/// A Redis restart during `tern up` (its own redis-server, append-only file
/// with fsync always).
#[test]
fn a_redis_restart_during_up_is_survived_or_resumable() {
    let server = match OwnServer::start("redis-server".into(), |port, dir| {
        vec![
            "--bind".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "always".into(),
            "--save".into(),
            String::new(),
            "--dir".into(),
            dir.display().to_string(),
        ]
    }) {
        Ok(s) => s,
        Err(reason) => {
            eprintln!("skipped: redis restart: {reason}");
            return;
        }
    };
    let url = format!("redis://127.0.0.1:{}", server.port);
    restart_during_up("redis", server, &url);
}

/// A MongoDB (SecantusDB) restart during `tern up` (its own server from the
/// venv `scripts/servers.sh install mongodb` makes, with a storage folder,
/// syncing on commit).
#[test]
fn a_mongodb_restart_during_up_is_survived_or_resumable() {
    let state = std::env::var_os("TERN_STATE_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tern-servers"),
        std::path::PathBuf::from,
    );
    let program = state.join("venv/bin/secantusd-py");
    if !program.exists() {
        eprintln!(
            "skipped: mongodb restart: {} not found (`scripts/servers.sh install mongodb`)",
            program.display()
        );
        return;
    }
    let server = match OwnServer::start(program, |port, dir| {
        vec![
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            port.to_string(),
            "--storage-path".into(),
            dir.display().to_string(),
            "--sync-on-commit".into(),
        ]
    }) {
        Ok(s) => s,
        Err(reason) => {
            eprintln!("skipped: mongodb restart: {reason}");
            return;
        }
    };
    let url = format!(
        "mongodb://127.0.0.1:{}/tern_restart?directConnection=true",
        server.port
    );
    restart_during_up("mongodb", server, &url);
}
