//! Advisor run time and peak memory on the EasyAntiCheat workload and on synthetic Watts–Strogatz
//! workloads scaled 1x to 4x. Each case runs in its own process (so its peak RSS is its own):
//! unlimited, with an 8 s limit per solve, and with the exact space tie-break
//! (`Strategy::exact_space`). One case: `-- --case ws3x [--time-limit 8] [--exact-space]`.
//!
//! `cargo bench -p tern-advisor --bench advisor` prints a table and writes
//! `target/advisor-bench.csv`; `-- --scaling` measures the chain family against its length
//! (`target/advisor-chain.csv`, `target/advisor-chain-bound.csv`); see docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tern_advisor::advise::prepare;
use tern_advisor::synthetic::{chain, generate};
use tern_advisor::{Model, Options, Workload};

/// Each case is stopped after this long.
const LIMIT: Duration = Duration::from_secs(120);

fn inputs(case: &str) -> (String, String) {
    if case == "eac" {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/advisor/");
        (
            std::fs::read_to_string(format!("{dir}eac.model")).unwrap(),
            std::fs::read_to_string(format!("{dir}eac.workload")).unwrap(),
        )
    } else if case == "hotel" {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/advisor/");
        (
            std::fs::read_to_string(format!("{dir}hotel.model")).unwrap(),
            std::fs::read_to_string(format!("{dir}hotel.workload")).unwrap(),
        )
    } else if let Some(n) = case.strip_prefix("chain") {
        let s = chain(n.parse().unwrap());
        (s.model, s.workload)
    } else {
        let scale: usize = case
            .trim_start_matches("ws")
            .trim_end_matches('x')
            .parse()
            .unwrap();
        let s = generate(scale, 42);
        (s.model, s.workload)
    }
}

/// The number after `flag` on the command line.
fn arg(flag: &str) -> Option<u64> {
    std::env::args()
        .skip_while(|a| a != flag)
        .nth(1)
        .and_then(|t| t.parse().ok())
}

/// Runs one case in this process and prints one CSV line.
fn run_case(case: &str) {
    let (m, w) = inputs(case);
    let time_limit = std::env::args()
        .skip_while(|a| a != "--time-limit")
        .nth(1)
        .and_then(|t| t.parse().ok());
    let strategy = tern_advisor::solver::Strategy {
        exact_space: std::env::args().any(|a| a == "--exact-space"),
        ..Default::default()
    };
    let opts = Options {
        time_limit,
        strategy,
        past_prefixes: !std::env::args().any(|a| a == "--no-past-prefixes"),
        enumeration_limit: match arg("--enumeration-limit") {
            Some(0) => None,
            Some(n) => Some(n),
            None => Options::default().enumeration_limit,
        },
        ..Options::default()
    };
    let cpu0 = tern_procstat::process_cpu_seconds();
    let t0 = Instant::now();
    let model = Model::parse(case, &m).unwrap();
    let workload = Workload::parse(case, &w, &model).unwrap();
    let prepared = prepare(&model, &workload, &opts).unwrap();
    let t1 = Instant::now();
    let rec = prepared.recommend(&opts).unwrap();
    let t2 = Instant::now();
    let queries = workload
        .statements
        .iter()
        .filter(|s| matches!(s.body, tern_advisor::workload::Body::Query(_)))
        .count();
    println!(
        "{case},{},{},{},{},{},{:.3},{:.3},{:.3},{},{},{},{:.4},{:.0},{:.2}",
        model.entities.len(),
        queries,
        workload.statements.len() - queries,
        rec.candidates,
        rec.variables,
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        (t2 - t0).as_secs_f64(),
        tern_procstat::peak_rss_kib() / 1024,
        rec.column_families.len(),
        rec.optimal,
        rec.total_cost,
        rec.total_size_bytes,
        tern_procstat::process_cpu_seconds() - cpu0
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--case") {
        run_case(&args[i + 1]);
        return;
    }
    let exe = std::env::current_exe().unwrap();
    if args.iter().any(|a| a == "--scaling") {
        scaling(&exe);
        return;
    }
    let header = "limit_s,case,entities,queries,updates,candidates,variables,prepare_s,solve_s,total_s,peak_rss_mib,column_families,optimal,total_cost,total_size_bytes,cpu_s";
    println!("{header}");
    let mut csv = format!("{header}\n");
    // Unlimited (proven optimal), with an 8 s limit per solver stage, and unlimited with the
    // exact space tie-break.
    for limit in ["none", "8", "exact"] {
        for case in ["eac", "hotel", "ws1x", "ws2x", "ws3x", "ws4x"] {
            let mut args = vec!["--case", case];
            match limit {
                "none" => {}
                "exact" => args.push("--exact-space"),
                _ => args.extend(["--time-limit", limit]),
            }
            let mut child = Command::new(&exe)
                .args(&args)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let start = Instant::now();
            let status = loop {
                if let Some(st) = child.try_wait().unwrap() {
                    break Some(st);
                }
                if start.elapsed() > LIMIT {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            let mut stdout = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut stdout)
                .unwrap();
            let line = match status {
                Some(st) if st.success() => stdout.trim().to_string(),
                Some(_) => format!("{case},failed"),
                None => format!("{case},timeout after {} s", LIMIT.as_secs()),
            };
            let line = format!("{limit},{line}");
            println!("{line}");
            csv.push_str(&line);
            csv.push('\n');
        }
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/advisor-bench.csv"
    );
    std::fs::write(path, csv).unwrap();
}

/// `-- --scaling`: run time (wall and CPU) and peak memory against model size on the chain
/// family, each size in its own process, twice: with `--time-limit 5` (the bound every phase
/// keeps; `target/advisor-chain.csv`) and without a time limit, under the enumeration's default
/// work bound (`target/advisor-chain-bound.csv`). Up to 200 entities also without any bound
/// (`--enumeration-limit 0`, the cubic growth before; in the second CSV with `limit` `none`).
fn scaling(exe: &std::path::Path) {
    let header = "entities,candidates,prepare_s,solve_s,total_s,peak_rss_mib,optimal,cpu_s,limit";
    let sizes = [25, 50, 100, 200, 400, 800, 1600, 3200];
    for (file, limit, args) in [
        ("advisor-chain.csv", "5s", &["--time-limit", "5"][..]),
        ("advisor-chain-bound.csv", "bound", &[][..]),
    ] {
        println!("{file}\n{header}");
        let mut csv = format!("{header}\n");
        let mut runs: Vec<(usize, &str, Vec<&str>)> =
            sizes.iter().map(|n| (*n, limit, args.to_vec())).collect();
        if limit == "bound" {
            runs.extend(
                [25, 50, 100, 150, 200]
                    .iter()
                    .map(|n| (*n, "none", vec!["--enumeration-limit", "0"])),
            );
        }
        for (n, limit, extra) in runs {
            let case = format!("chain{n}");
            let out = Command::new(exe)
                .args(["--case", &case])
                .args(&extra)
                .output()
                .unwrap();
            let line = String::from_utf8_lossy(&out.stdout);
            let f: Vec<&str> = line.trim().split(',').collect();
            if f.len() < 15 {
                println!(
                    "{case}: no result ({})",
                    String::from_utf8_lossy(&out.stderr)
                );
                continue;
            }
            // case,entities,queries,updates,candidates,variables,prepare,solve,total,rss,cfs,optimal,cost,size,cpu
            let row = format!(
                "{},{},{},{},{},{},{},{},{limit}",
                f[1], f[4], f[6], f[7], f[8], f[9], f[11], f[14]
            );
            println!("{row}");
            csv.push_str(&row);
            csv.push('\n');
        }
        let path = format!("{}/../../target/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::write(path, csv).unwrap();
    }
}
