//! `tern analyze contention` run time and peak memory on generated schemas
//! (`tern_contention::synthetic`): the `tasks` family (a four-level hierarchy
//! with keys of up to four parts and nested sub-tasks, 1-50 kinds, safe and
//! unsafe: every check must answer in under 1 s) and the big `forest` and
//! `chain` families (up to 200,000 kinds: near-linear). Each point runs in
//! its own process (so its peak RSS is its own) and times the whole analysis
//! as the CLI does it: parse, symbolic check, witness, suggestion (printed,
//! parsed back and re-checked), finite cross-check, text output.
//!
//! `cargo bench -p tern-contention --bench scaling [-- --quick]` prints a
//! table and writes `target/contention-bench.csv`; `cargo run --release -p
//! tern-contention --features plot --bin contention-plot` draws
//! docs/contention-scaling.png from it. One point: `-- --case tasks 50 unsafe`.
//! The finite cross-check against the code before it (`baseline_finite.rs`),
//! side by side with ratios, closes the run (alone: `-- --finite-only [--quick]`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::process::Command;
use std::time::Instant;

use tern_contention::synthetic::{Shape, schema};

mod baseline_finite;

/// One point: prints `shape,kinds,variant,verdict,finite,suggested,bytes,seconds,cpu_seconds,peak_rss_mib`.
fn run_case(shape: &str, kinds: usize, variant: &str) {
    let sh = match shape {
        "tasks" => Shape::Tasks,
        "forest" => Shape::Forest,
        _ => Shape::Chain,
    };
    let src = schema(sh, kinds, variant == "unsafe");
    let start = Instant::now();
    let cpu = tern_procstat::main_thread_cpu_seconds();
    let g = tern_contention::parse(&src).expect("generated schemas parse");
    let r = tern_contention::analyze_grammar(&g);
    let text = tern_contention::render::text(&g, &r);
    let secs = start.elapsed().as_secs_f64();
    let cpu = tern_procstat::main_thread_cpu_seconds() - cpu;
    assert!(
        !r.disagreement(),
        "the two checks disagree on {shape} {kinds}"
    );
    println!(
        "{shape},{kinds},{variant},{:?},{},{},{},{secs:.4},{cpu:.4},{:.1}",
        r.verdict,
        r.finite
            .as_ref()
            .map_or("skipped".to_owned(), |f| format!("{} keys", f.alphabet)),
        r.suggestion.is_some(),
        src.len() + text.len(),
        tern_procstat::peak_rss_kib() as f64 / 1024.0
    );
}

/// The finite cross-check alone, new against the baseline (the code before,
/// `baseline_finite.rs`) on one schema of the `tasks` family: prints
/// `kinds,variant,keys,new_s,baseline_s,ratio`.
fn run_finite(kinds: usize, variant: &str) {
    let src = schema(Shape::Tasks, kinds, variant == "unsafe");
    let g = tern_contention::parse(&src).unwrap();
    let d = tern_contention::Domains::new(&g, tern_contention::Domains::sufficient(&g));
    let t = Instant::now();
    let new = tern_contention::finite::check(&g, &d);
    let new_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let old = baseline_finite::check(&g, &d);
    let old_s = t.elapsed().as_secs_f64();
    assert_eq!(
        new.safe(),
        old,
        "new and baseline disagree on tasks {kinds} {variant}"
    );
    println!(
        "{kinds},{variant},{},{new_s:.4},{old_s:.4},{:.0}",
        new.alphabet,
        old_s / new_s.max(1e-9)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--finite") {
        run_finite(args[i + 1].parse().unwrap(), &args[i + 2]);
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--case") {
        run_case(&args[i + 1], args[i + 2].parse().unwrap(), &args[i + 3]);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    if args.iter().any(|a| a == "--finite-only") {
        finite_against_baseline(&std::env::current_exe().unwrap(), quick);
        return;
    }
    let mut points: Vec<(&str, usize)> = Vec::new();
    for k in [1, 2, 3, 4, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50] {
        points.push(("tasks", k));
    }
    let big: &[usize] = if quick {
        &[12_500, 25_000, 50_000]
    } else {
        &[12_500, 25_000, 50_000, 100_000, 200_000]
    };
    for &k in big {
        points.push(("forest", k));
        points.push(("chain", k));
    }
    let exe = std::env::current_exe().unwrap();
    let header =
        "shape,kinds,variant,verdict,finite,suggested,bytes,seconds,cpu_seconds,peak_rss_mib";
    println!("{header}");
    let mut csv = format!("{header}\n");
    for (shape, k) in points {
        for variant in ["safe", "unsafe"] {
            let line = run_self(&exe, &["--case", shape, &k.to_string(), variant]);
            let line = line.trim();
            println!("{line}");
            csv.push_str(line);
            csv.push('\n');
        }
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/contention-bench.csv"
    );
    std::fs::write(path, csv).unwrap();
    println!("written to target/contention-bench.csv");
    finite_against_baseline(&exe, quick);
}

/// The finite cross-check against the baseline, side by side, each pair in
/// its own process.
fn finite_against_baseline(exe: &std::path::Path, quick: bool) {
    println!("\nfinite cross-check, tasks family: kinds,variant,keys,new_s,baseline_s,ratio");
    let sizes: &[usize] = if quick { &[3, 4] } else { &[3, 4, 10, 50] };
    for &k in sizes {
        for variant in ["safe", "unsafe"] {
            print!("{}", run_self(exe, &["--finite", &k.to_string(), variant]));
        }
    }
}

/// Runs this benchmark again as `exe args` (one point in its own process) and
/// returns what it printed; panics with its stderr when it fails.
fn run_self(exe: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(exe).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
