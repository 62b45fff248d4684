//! KVolve's Table I with the standard tool: `valkey-benchmark` (redis-benchmark),
//! 50 clients, 1M keys, GET, SET, HSET, HGETALL, unpipelined and `-P 10`, against
//! three Valkey servers of the same build started here side by side: without the
//! module (the baseline), with the module and nothing pending (the filter's early
//! return), and with the module and lazy migrations pending on the benchmarked kinds
//! (`user` hashes one `add` step ahead, every entity up to date; `key` strings with one
//! former name, `oldkey`, declared: the filter's fast path reads each key's version and
//! the former name and lets the command run as it is, src/fast.rs). Rounds
//! alternate between the servers; the median requests/s of each cell and its ratio to
//! the baseline are printed as a markdown table (docs/benchmarks.md), with the
//! main thread's CPU time per request of each server (`/proc/<pid>/schedstat`
//! around each run, median): steadier than requests/s on a shared machine.
//! `TERN_BENCH_MODULE_BEFORE=<path of another build of the module>` adds a fourth
//! server, that build with the same kinds pending (a change's before and after in
//! one run).
//!
//! `cargo bench -p tern-redis-module --bench table1` (release build of the module).
//! Environment: TERN_BENCH_KEYS (1000000), TERN_BENCH_REQUESTS (1000000),
//! TERN_BENCH_ROUNDS (3), TERN_BENCH_CLIENTS (50).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Loads `count` commands made by `line` through `valkey-cli --pipe`.
fn pipe(port: u16, count: usize, line: impl Fn(usize) -> Vec<String>) {
    let mut child = Command::new("valkey-cli")
        .args(["-p", &port.to_string(), "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("valkey-cli");
    {
        let mut w = std::io::BufWriter::new(child.stdin.take().unwrap());
        for i in 0..count {
            let args = line(i);
            write!(w, "*{}\r\n", args.len()).unwrap();
            for a in args {
                write!(w, "${}\r\n{a}\r\n", a.len()).unwrap();
            }
        }
    }
    assert!(child.wait().unwrap().success());
}

fn bench(
    port: u16,
    clients: usize,
    requests: usize,
    keys: usize,
    pipeline: usize,
    cmd: &[&str],
) -> f64 {
    let out = Command::new("valkey-benchmark")
        .args([
            "-p",
            &port.to_string(),
            "-c",
            &clients.to_string(),
            "-n",
            &requests.to_string(),
        ])
        .args([
            "-r",
            &keys.to_string(),
            "-P",
            &pipeline.to_string(),
            "-q",
            "--csv",
        ])
        .args(cmd)
        .output()
        .expect("valkey-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps",...: the second field of the data line.
    text.lines()
        .nth(1)
        .and_then(|l| l.split(',').nth(1))
        .and_then(|v| v.trim_matches('"').parse().ok())
        .unwrap_or_else(|| panic!("no result from valkey-benchmark: {text}"))
}

/// The CPU time the server's main thread has used, in nanoseconds.
fn cpu_ns(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(f64::NAN)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let keys = env("TERN_BENCH_KEYS", 1_000_000);
    let requests = env("TERN_BENCH_REQUESTS", 1_000_000);
    let rounds = env("TERN_BENCH_ROUNDS", 3);
    let clients = env("TERN_BENCH_CLIENTS", 50);
    let url = "redis://127.0.0.1/0?string=oldkey,key";
    let fast = ["--appendonly", "no"];
    let start = |module: bool| {
        if module {
            common::Valkey::start(url, &fast)
        } else {
            common::Valkey::start_without_module(&fast)
        }
    };
    let before = std::env::var_os("TERN_BENCH_MODULE_BEFORE").map(std::path::PathBuf::from);
    let mut servers = Vec::new();
    for s in [start(false), start(true), start(true)].into_iter().chain(
        before
            .as_deref()
            .map(|p| common::Valkey::start_module_at(p, url, &fast)),
    ) {
        match s {
            Ok(s) => servers.push(s),
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        }
    }
    let labels = [
        "no module",
        "module, nothing pending",
        "module, kinds pending (up to date; `key` with a former name)",
        "module before, kinds pending",
    ];
    let labels = &labels[..servers.len()];
    let t = Instant::now();
    for (n, s) in servers.iter().enumerate() {
        pipe(s.port, keys, |i| {
            vec![
                "HSET".into(),
                format!("user:{i:012}"),
                "f".into(),
                "v".into(),
                "x".into(),
                "0".into(),
                "_v".into(),
                "1".into(),
            ]
        });
        if n < 2 {
            pipe(s.port, keys, |i| {
                vec!["SET".into(), format!("key:{i:012}"), "xxx".into()]
            });
            continue;
        }
        // The pending kinds: `user` one step ahead of none (its entities carry _v 1 and x:
        // up to date), `key` renamed from `oldkey` (then written: created through the
        // module).
        common::up(
            s,
            &[
                (1, "lazy\nadd user.x = 0\n"),
                (2, "lazy\nrename kind oldkey to key\n"),
            ],
        )
        .await;
        pipe(s.port, keys, |i| {
            vec!["SET".into(), format!("key:{i:012}"), "xxx".into()]
        });
    }
    eprintln!(
        "loaded {keys} hashes and {keys} strings per server in {:.1}s",
        t.elapsed().as_secs_f64()
    );
    let tests: [(&str, Vec<&str>); 4] = [
        ("SET", vec!["SET", "key:__rand_int__", "xxx"]),
        ("GET", vec!["GET", "key:__rand_int__"]),
        ("HSET", vec!["HSET", "user:__rand_int__", "f", "v"]),
        ("HGETALL", vec!["HGETALL", "user:__rand_int__"]),
    ];
    for s in &servers {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut s.conn())
            .unwrap();
    }
    let mut head = String::from("| command | -P |");
    let mut rule = String::from("|---|---|");
    for (i, l) in labels.iter().enumerate() {
        head.push_str(&format!(" {l} rps | ns CPU/req |"));
        rule.push_str("---|---|");
        if i > 0 {
            head.push_str(" rps ratio | CPU ratio |");
            rule.push_str("---|---|");
        }
    }
    println!("{head}\n{rule}");
    for pipeline in [1, 10] {
        for (name, cmd) in &tests {
            let mut rps = vec![Vec::new(); servers.len()];
            let mut cpu = vec![Vec::new(); servers.len()];
            for _ in 0..rounds {
                for (i, s) in servers.iter().enumerate() {
                    let pid = s.pid().unwrap_or(0);
                    let c0 = cpu_ns(pid);
                    rps[i].push(bench(s.port, clients, requests, keys, pipeline, cmd));
                    cpu[i].push((cpu_ns(pid) - c0) / requests as f64);
                }
            }
            let r: Vec<f64> = rps.into_iter().map(median).collect();
            let c: Vec<f64> = cpu.into_iter().map(median).collect();
            let mut line = format!("| {name} | {pipeline} |");
            for i in 0..servers.len() {
                line.push_str(&format!(" {:.0} | {:.0} |", r[i], c[i]));
                if i > 0 {
                    line.push_str(&format!(
                        " {:+.1} % | {:+.1} % |",
                        (r[i] / r[0] - 1.0) * 100.0,
                        (c[i] / c[0] - 1.0) * 100.0
                    ));
                }
            }
            println!("{line}");
        }
    }
    // Server-side time per command (INFO commandstats, all rounds): less sensitive than
    // requests/s to a machine shared with other work. On the pending server the
    // application's commands run as tern.r/tern.w, whose time includes the inner command.
    println!();
    println!("| server | command | calls | usec_per_call |");
    println!("|---|---|---|---|");
    for (label, s) in labels.iter().zip(&servers) {
        let mut c = s.conn();
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut c)
            .unwrap();
        for l in stats.lines() {
            let Some(rest) = l.strip_prefix("cmdstat_") else {
                continue;
            };
            let (name, fields) = rest.split_once(':').unwrap_or_default();
            if !["get", "set", "hset", "hgetall", "tern.r", "tern.w"].contains(&name) {
                continue;
            }
            let field = |f: &str| {
                fields
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
                    .unwrap_or("?")
                    .to_owned()
            };
            println!(
                "| {label} | {name} | {} | {} |",
                field("calls"),
                field("usec_per_call")
            );
        }
    }
}
