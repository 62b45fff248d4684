//! KVolve's Table I with the standard tool: `valkey-benchmark` (redis-benchmark),
//! 50 clients, 1M keys, GET, SET, HSET, HGETALL, unpipelined and `-P 10`, against
//! three Valkey servers of the same build started here side by side: without the
//! module (the baseline), with the module and nothing pending (the filter's early
//! return), and with the module and lazy migrations pending on the benchmarked kinds
//! (`user` hashes one `add` step ahead, every entity up to date; `key` strings with one
//! former name, `oldkey`, declared: the filter's fast path reads each key's version and
//! the former name and lets the command run as it is, src/fast.rs). Rounds
//! alternate between the servers; the median requests/s of each cell and its ratio to
//! the baseline are printed as a markdown table (docs/benchmarks.md).
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
    let servers = match (start(false), start(true), start(true)) {
        (Ok(a), Ok(b), Ok(c)) => [a, b, c],
        (a, b, c) => {
            let why = [a.err(), b.err(), c.err()]
                .into_iter()
                .flatten()
                .next()
                .unwrap_or_default();
            eprintln!("skipped: {why}");
            return;
        }
    };
    let labels = [
        "no module",
        "module, nothing pending",
        "module, kinds pending (up to date; `key` with a former name)",
    ];
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
        }
    }
    // The pending kinds: `user` one step ahead of none (its entities carry _v 1 and x: up
    // to date), `key` renamed from `oldkey` (then written: created through the module).
    common::up(
        &servers[2],
        &[
            (1, "lazy\nadd user.x = 0\n"),
            (2, "lazy\nrename kind oldkey to key\n"),
        ],
    )
    .await;
    pipe(servers[2].port, keys, |i| {
        vec!["SET".into(), format!("key:{i:012}"), "xxx".into()]
    });
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
    println!(
        "| command | -P | {} rps | {} rps | ratio | {} rps | ratio |",
        labels[0], labels[1], labels[2]
    );
    println!("|---|---|---|---|---|---|---|");
    for pipeline in [1, 10] {
        for (name, cmd) in &tests {
            let mut rps = [Vec::new(), Vec::new(), Vec::new()];
            for _ in 0..rounds {
                for (i, s) in servers.iter().enumerate() {
                    rps[i].push(bench(s.port, clients, requests, keys, pipeline, cmd));
                }
            }
            let m: Vec<f64> = rps.into_iter().map(median).collect();
            println!(
                "| {name} | {pipeline} | {:.0} | {:.0} | {:+.1} % | {:.0} | {:+.1} % |",
                m[0],
                m[1],
                (m[1] / m[0] - 1.0) * 100.0,
                m[2],
                (m[2] / m[0] - 1.0) * 100.0
            );
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
