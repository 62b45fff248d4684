//! `tern worker` on several hosts: each worker in a network namespace of its
//! own (`ip netns` + a veth pair the test makes), with its own address, all
//! sharing one Redis server that listens on the address of a bridge the test
//! makes too. One worker is killed (`kill -9`) mid-run and started again, as
//! a scheduler restarts a failed pod; the run ends with the export of one
//! uninterrupted single-runner run, and the server saw clients from every
//! worker's address.
//!
//! Every address is in 198.18.0.0/15 (RFC 2544's range for test networks),
//! on the test's own bridge and namespaces only: nothing else routes there,
//! and the test removes them when it ends. Needs root, `ip` (iproute2) and
//! `redis-server`/`redis-cli`; without them, or where the sandbox refuses
//! network namespaces, the test prints exactly what failed and is skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Project, RELEASE2, blog_lines};

/// The Redis server's port on the bridge's address.
const PORT: u16 = 6390;

/// Runs `ip ARGS`; the error names the command and what it said.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("`ip {}` could not start: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A bridge with an address in the root namespace and `hosts` namespaces,
/// each joined to it by a veth pair with an address of its own; removed on drop.
struct TestNet {
    tag: String,
    subnet: String,
    bridge: String,
    namespaces: Vec<String>,
    veths: Vec<String>,
}

impl TestNet {
    fn new(hosts: usize) -> Result<TestNet, String> {
        let pid = std::process::id();
        // Names of at most 15 bytes, unique per test process.
        let tag = format!("tn{}", pid % 100_000);
        let mut net = TestNet {
            subnet: format!("198.18.{}", 20 + pid % 200),
            bridge: format!("{tag}br"),
            tag,
            namespaces: Vec::new(),
            veths: Vec::new(),
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}.254/24", net.subnet),
            "dev",
            &net.bridge,
        ])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for i in 1..=hosts {
            let ns = format!("{}w{i}", net.tag);
            ip(&["netns", "add", &ns])?;
            net.namespaces.push(ns.clone());
            let (host_end, ns_end) = (format!("{}h{i}", net.tag), format!("{}n{i}", net.tag));
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
            ])?;
            net.veths.push(host_end.clone());
            ip(&["link", "set", &ns_end, "netns", &ns])?;
            ip(&["link", "set", &host_end, "master", &net.bridge])?;
            ip(&["link", "set", &host_end, "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{}.{i}/24", net.subnet),
                "dev",
                &ns_end,
            ])?;
            ip(&["-n", &ns, "link", "set", &ns_end, "up"])?;
        }
        Ok(net)
    }

    /// The address of the bridge (the store's host).
    fn store_addr(&self) -> String {
        format!("{}.254", self.subnet)
    }

    /// The address of worker host `i` (1-based).
    fn host_addr(&self, i: usize) -> String {
        format!("{}.{i}", self.subnet)
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for ns in &self.namespaces {
            let _ = ip(&["netns", "del", ns]);
        }
        for veth in &self.veths {
            let _ = ip(&["link", "del", veth]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// The test's own redis-server, stopped (by its pid) on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Why the test cannot run here, if so.
fn missing_tools() -> Option<String> {
    for (tool, arg) in [
        ("ip", "-V"),
        ("redis-server", "--version"),
        ("redis-cli", "--version"),
    ] {
        let ok = Command::new(tool)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Some(format!("{tool} is not on the PATH"));
        }
    }
    None
}

/// Starts redis-server on `addr`:[`PORT`] and waits until it answers.
fn start_redis(addr: &str, dir: &std::path::Path) -> Result<Server, String> {
    let child = Command::new("redis-server")
        .args(["--bind", addr, "--port", &PORT.to_string()])
        // Reached from the namespaces' addresses, with no password: only this
        // bridge's address listens, nothing outside the test routes there.
        .args(["--protected-mode", "no"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("redis-server could not start: {e}"))?;
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect((addr, PORT)).is_err() {
        if Instant::now() > deadline {
            return Err(format!(
                "redis-server on {addr}:{PORT} did not answer in 10 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(server)
}

/// The addresses of the server's clients (`CLIENT LIST`).
fn client_addrs(addr: &str) -> BTreeSet<String> {
    let out = Command::new("redis-cli")
        .args(["-h", addr, "-p", &PORT.to_string(), "CLIENT", "LIST"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("addr="))
        .filter_map(|a| a.rsplit_once(':').map(|(ip, _)| ip.to_owned()))
        .collect()
}

/// `tern worker` of project `p`, run inside namespace `ns`.
fn worker_in(p: &Project, ns: &str) -> Child {
    Command::new("ip")
        .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_tern")])
        .args([
            "worker",
            "--workers",
            "2",
            "--partitions",
            "16",
            "--max-rate",
            "600",
        ])
        .current_dir(p.path(""))
        .env_remove("TERN_STORE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Is a migration running (`tern status --json`)?
fn running(p: &Project) -> bool {
    let json = p.ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    !v["running"].is_null()
}

#[test]
fn workers_in_network_namespaces_share_one_run_and_survive_a_kill() {
    if let Some(reason) = missing_tools() {
        eprintln!("skipped: workers across network namespaces: {reason}");
        return;
    }
    let net = match TestNet::new(2) {
        Ok(net) => net,
        Err(reason) => {
            eprintln!("skipped: workers across network namespaces: {reason}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let server = match start_redis(&net.store_addr(), dir.path()) {
        Ok(s) => s,
        Err(reason) => {
            eprintln!("skipped: workers across network namespaces: {reason}");
            return;
        }
    };
    let url = |prefix: &str| format!("redis://{}:{PORT}/?prefix={prefix}", net.store_addr());
    let lines = blog_lines(300, 10);
    // One uninterrupted single runner, from the root namespace.
    let reference = Project::on(&url("tern_netns_ref"), 1000);
    reference.write("data.jsonl", &lines);
    reference.ok(&["import", "data.jsonl"]);
    reference.write("migrations/0001_release2.tern", RELEASE2);
    reference.ok(&["up"]);
    let expected = reference.ok(&["export"]);

    let p = Project::on(&url("tern_netns"), 1000);
    p.write("data.jsonl", &lines);
    p.ok(&["import", "data.jsonl"]);
    p.write("migrations/0001_release2.tern", RELEASE2);
    let mut workers: Vec<Child> = net.namespaces.iter().map(|ns| worker_in(&p, ns)).collect();
    let mut seen = BTreeSet::new();
    let mut killed = false;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(180);
    loop {
        assert!(
            Instant::now() < deadline,
            "the workers did not finish in 180 s"
        );
        seen.extend(client_addrs(&net.store_addr()));
        if !killed && started.elapsed() > Duration::from_millis(1000) {
            assert!(running(&p), "the kill comes while the run is under way");
            // kill -9 of host 1's worker, and a restart (a scheduler's).
            workers[0].kill().unwrap();
            workers[0].wait().unwrap();
            killed = true;
            workers[0] = worker_in(&p, &net.namespaces[0]);
        }
        if killed && workers.iter_mut().all(|w| w.try_wait().unwrap().is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, w) in workers.iter_mut().enumerate() {
        let status = w.wait().unwrap();
        assert!(status.success(), "worker {} exited {status}", i + 1);
    }
    for i in 1..=net.namespaces.len() {
        assert!(
            seen.contains(&net.host_addr(i)),
            "the server saw host {i}'s address {}: {seen:?}",
            net.host_addr(i)
        );
    }
    assert_eq!(
        p.ok(&["export"]),
        expected,
        "the data of one uninterrupted run"
    );
    let json = p.ok(&["status", "--json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["migrations"][0]["state"], "applied", "{json}");
    assert!(v["running"].is_null(), "{json}");
    drop(server);
    drop(net);
}
