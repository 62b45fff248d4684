//! Migrations of N statements and no entities: the time to parse, plan and
//! run (`tern up` on the memory store) for N, 2N, 4N, ..., and the ratio of
//! each to the one before. Linear in N means a ratio near 2 per doubling
//! (a quadratic step shows as 4).
//!
//! ```sh
//! cargo bench -p tern-core --bench statements -- --entities 10000 --rounds 5
//! ```
//!
//! `--entities` is the first N, `--rounds` the number of doublings. Two
//! scripts: `adds` (add, rename and delete over four kinds: four long local
//! stages) and `mixed` (the same with a `copy` every fourth statement: a stage
//! each).

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::migrate::plan;
use tern_core::migrate::{LeaseOptions, Migration, MigrationSet, Migrator, RunOptions};
use tern_core::store::memory::MemoryStore;
use tern_testkit::bench::BenchArgs;

fn script(n: usize, copies: bool) -> String {
    let mut out = String::with_capacity(n * 40);
    for i in 0..n {
        let k = i % 4;
        let line = match i % 4 {
            0 => format!("add k{k}.p{i} = {i}"),
            1 => format!("rename k{k}.p{} to q{i}", i - 1),
            2 => format!("delete k{k}.q{} where k{k}.x = 1", i - 1),
            _ if copies => format!("copy k0.p{} to k{k} where k0.id = k{k}.owner", i - 3),
            _ => format!("add k{k}.r{i} = \"v\""),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

struct Times {
    parse: Duration,
    plan: Duration,
    up: Duration,
}

async fn measure(n: usize, copies: bool) -> Times {
    let text = script(n, copies);
    let t = Instant::now();
    let m = Migration::from_script(1, "many", "0001_many.tern", &text).expect("parse");
    let parse = t.elapsed();
    let mut set = MigrationSet::new();
    set.add(m.clone()).expect("set");
    let t = Instant::now();
    let p = plan::plan(&m, &BTreeMap::new());
    let h = plan::history(&set, 1);
    let plan = t.elapsed();
    assert!(!p.stages.is_empty() && !h.is_empty());
    let store = Arc::new(MemoryStore::new());
    let t = Instant::now();
    Migrator::new(store, set)
        .with_run_options(RunOptions {
            estimate_totals: false,
            ..RunOptions::default()
        })
        .with_lease_options(LeaseOptions::default())
        .up(None)
        .await
        .expect("up");
    let up = t.elapsed();
    Times { parse, plan, up }
}

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(10_000, 4);
    for (name, copies) in [("adds", false), ("mixed", true)] {
        println!("script `{name}`: N statements, no entities");
        let mut before: Option<Times> = None;
        let mut n = a.entities;
        for _ in 0..a.rounds {
            let t = measure(n, copies).await;
            let ratio = |now: Duration, then: Option<Duration>| {
                then.map_or_else(String::new, |d| {
                    format!(" (x{:.2})", now.as_secs_f64() / d.as_secs_f64().max(1e-9))
                })
            };
            println!(
                "N={n:>8}  parse {:>8.3}s{:<9}  plan {:>8.3}s{:<9}  up {:>8.3}s{:<9}",
                t.parse.as_secs_f64(),
                ratio(t.parse, before.as_ref().map(|b| b.parse)),
                t.plan.as_secs_f64(),
                ratio(t.plan, before.as_ref().map(|b| b.plan)),
                t.up.as_secs_f64(),
                ratio(t.up, before.as_ref().map(|b| b.up)),
            );
            before = Some(t);
            n *= 2;
        }
    }
}
