//! `copy` and `move` with a join over N users and N posts through the join
//! index, against an `add` over the same N posts, and the safety check alone,
//! side by side in one run on a MongoDB wire-protocol server
//! (`tern_testkit::join_bench`). Each phase prints its line as soon as it
//! ends.
//!
//! ```sh
//! TERN_BENCH_MONGODB_URL=mongodb://127.0.0.1:27017 \
//!   cargo bench -p tern-mongodb --bench join -- --entities 100000
//! ```
//!
//! Uses the database `tern_join_bench_<pid>` and drops it afterwards, also
//! when a phase fails or the run is interrupted (Ctrl-C, SIGTERM). Before it
//! starts it drops the `tern_join_bench_<pid>` databases left by earlier runs
//! whose process is gone. `TERN_LOG` (e.g. `tern_mongodb=debug`) shows the
//! store's calls with their times on standard error.

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use tern_core::migrate::RunOptions;
use tern_testkit::bench::BenchArgs;
use tern_testkit::join_bench;

/// The prefix of this benchmark's databases.
const PREFIX: &str = "tern_join_bench_";

/// Is the process `pid` a run of this benchmark (a `join-<hash>` binary)?
fn is_live_bench(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .is_ok_and(|comm| comm.trim_end().starts_with("join"))
}

/// Drops the databases of earlier runs whose process is gone.
async fn drop_leftovers(client: &mongodb::Client) {
    let Ok(names) = client.list_database_names().await else {
        return;
    };
    for name in names {
        let Some(pid) = name.strip_prefix(PREFIX) else {
            continue;
        };
        if pid.parse::<u32>().is_ok_and(|p| !is_live_bench(p)) {
            match client.database(&name).drop().await {
                Ok(()) => println!("dropped the leftover database {name}"),
                Err(e) => println!("could not drop the leftover database {name}: {e}"),
            }
        }
    }
}

async fn load_and_run(url: &str, a: &BenchArgs) -> Result<join_bench::JoinTimes, String> {
    let store = tern_mongodb::open(url)
        .await
        .map_err(|e| format!("open: {e}"))?;
    join_bench::load(store.as_ref(), a.entities)
        .await
        .map_err(|e| format!("load: {e}"))?;
    let options = RunOptions {
        batch_size: a.batch,
        estimate_totals: false,
        ..RunOptions::default()
    };
    join_bench::run(store, a.entities, options)
        .await
        .map_err(|e| format!("run: {e}"))
}

/// Resolves at Ctrl-C or SIGTERM.
async fn interrupted() -> &'static str {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("a SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "interrupted (Ctrl-C)",
        _ = term.recv() => "interrupted (SIGTERM)",
    }
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TERN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .try_init();
    let a = BenchArgs::parse(100_000, 1);
    let base = std::env::var("TERN_BENCH_MONGODB_URL")
        .unwrap_or_else(|_| "mongodb://127.0.0.1:27017".to_owned());
    assert!(
        base.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    let client = mongodb::Client::with_uri_str(&base).await.expect("connect");
    drop_leftovers(&client).await;
    let db = format!("{PREFIX}{}", std::process::id());
    let url = format!("{}/{db}", base.trim_end_matches('/'));
    println!("MongoDB at {url}, batch {}", a.batch);
    let result = tokio::select! {
        r = load_and_run(&url, &a) => r,
        why = interrupted() => Err(why.to_owned()),
    };
    // The client sat idle through the run: its first call may meet a
    // connection the server closed (a broken pipe), so try again.
    let mut tries = 0;
    loop {
        tries += 1;
        match client.database(&db).drop().await {
            Ok(()) => {
                println!("dropped the database {db}");
                break;
            }
            Err(e) if tries < 3 => println!("dropping the database {db} failed ({e}); again"),
            Err(e) => {
                println!("could not drop the database {db}: {e}");
                break;
            }
        }
    }
    match result {
        Ok(times) => times.print(),
        Err(e) => panic!("{e}"),
    }
}
