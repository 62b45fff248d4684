//! Eager `add` + `rename` over N entities on the embedded store: tern (checkpoint
//! per batch, census, lease) against a hand-written loop over the same store API,
//! side by side in one run. Prints entities/s and the ratio.
//!
//! ```sh
//! cargo bench -p tern-core --bench eager -- --entities 1000000 --rounds 3
//! ```
//!
//! `--no-pushdown` runs tern's client-side path; `--no-count` runs tern without
//! the progress estimate (a count before the stage), as `tern up` does without
//! a terminal; `--two-calls` adds a third
//! side, tern on an embedded store that writes each batch and its checkpoint
//! in two transactions (as the engine does on stores without an atomic
//! `AtomicBatchWithMeta::write_batch_with_meta`).

#![allow(clippy::expect_used, clippy::panic)] // a benchmark: any failure should stop it loudly

use std::sync::Arc;
use std::time::Duration;

use tern_core::migrate::RunOptions;
use tern_core::model::Value;
use tern_core::store::embedded::{DEFAULT_CACHE_BYTES, EmbeddedOptions, EmbeddedStore};
use tern_core::store::{Filter, ScanRequest, Store, Write};
use tern_testkit::bench::{self, BenchArgs, Ratios};
use tern_testkit::intercept::{Intercepted, TwoCalls};

/// The baseline: what a careful engineer writes by hand with the same store API.
async fn hand_loop(store: &dyn Store, batch: usize) -> u64 {
    let mut cursor = None;
    let mut done = 0u64;
    loop {
        let page = store
            .scan(
                "blogpost",
                ScanRequest {
                    filter: Filter::at_version(0),
                    cursor,
                    limit: batch,
                },
            )
            .await
            .expect("scan");
        let writes: Vec<Write> = page
            .entities
            .into_iter()
            .map(|e| {
                let mut new = e.clone();
                new.value.insert("likes".into(), Value::Int(0));
                if let Some(t) = new.value.remove("text") {
                    new.value.insert("content".into(), t);
                }
                new.version = 2;
                Write::Replace { expected: e, new }
            })
            .collect();
        done += writes.len() as u64;
        store.write_batch(writes).await.expect("write");
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return done,
        }
    }
}

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(1_000_000, 3);
    // `--cache-mb N`: redb's page cache of every store (default: the embedded store's).
    let store_options = EmbeddedOptions {
        cache_bytes: a.value("--cache-mb").map_or(DEFAULT_CACHE_BYTES, |v| {
            v.parse::<usize>().expect("--cache-mb needs a number") << 20
        }),
    };
    let open = |name: &str, dir: &tempfile::TempDir| {
        EmbeddedStore::open_with(dir.path().join(name), store_options).expect("open")
    };
    // `--two-calls`: a third side, tern with each batch and its checkpoint in two transactions.
    let two_calls = a.flag("--two-calls");
    // `--no-count`: tern without the progress estimate (the embedded store's
    // count of the kind's keys), as `tern up` runs without a terminal.
    let options = RunOptions {
        batch_size: a.batch,
        pushdown_batch_size: a.batch,
        pushdown: a.pushdown,
        estimate_totals: !a.flag("--no-count"),
        ..RunOptions::default()
    };
    println!(
        "eager add+rename, embedded store (redb, cache {} MiB), {} entities, batch {}, {} round(s), tern pushdown {}, progress estimate {}{}",
        store_options.cache_bytes >> 20,
        a.entities,
        a.batch,
        a.rounds,
        a.pushdown,
        options.estimate_totals,
        if two_calls {
            ", and tern with batch and checkpoint in two calls"
        } else {
            ""
        }
    );
    let mut ratios = Ratios::new("loop");
    let (mut two_vs_loop, mut tern_vs_two) = (Vec::new(), Vec::new());
    for round in 0..a.rounds {
        let dir = tempfile::tempdir().expect("tempdir");
        let loop_store = open("loop.redb", &dir);
        let tern_store: Arc<dyn Store> = Arc::new(open("tern.redb", &dir));
        bench::load(&loop_store, a.entities).await.expect("load");
        bench::load(tern_store.as_ref(), a.entities)
            .await
            .expect("load");
        if !two_calls {
            let ((n_loop, t_loop), (n_tern, t_tern)) = bench::in_turn(
                round,
                hand_loop(&loop_store, a.batch),
                bench::tern_up_with(Arc::clone(&tern_store), options.clone()),
            )
            .await;
            let n_tern = n_tern.expect("tern up");
            assert_eq!(n_loop as usize, a.entities);
            assert_eq!(n_tern as usize, a.entities);
            ratios.record(round, (n_loop, t_loop), (n_tern, t_tern));
            continue;
        }
        let two_store: Arc<dyn Store> =
            Arc::new(Intercepted::new(Arc::new(open("two.redb", &dir)), TwoCalls));
        bench::load(two_store.as_ref(), a.entities)
            .await
            .expect("load");
        // The three sides in turn, each round starting with the next one.
        let mut times = [Duration::ZERO; 3];
        for k in 0..3 {
            let side = (round + k) % 3;
            let (n, t) = match side {
                0 => bench::timed(hand_loop(&loop_store, a.batch)).await,
                1 => {
                    let (n, t) = bench::timed(bench::tern_up_with(
                        Arc::clone(&tern_store),
                        options.clone(),
                    ))
                    .await;
                    (n.expect("tern up"), t)
                }
                _ => {
                    let (n, t) =
                        bench::timed(bench::tern_up_with(Arc::clone(&two_store), options.clone()))
                            .await;
                    (n.expect("tern up (two calls)"), t)
                }
            };
            assert_eq!(n as usize, a.entities);
            times[side] = t;
        }
        let n = a.entities as u64;
        ratios.record(round, (n, times[0]), (n, times[1]));
        let (two, tern) = (times[2].as_secs_f64(), times[1].as_secs_f64());
        two_vs_loop.push(two / times[0].as_secs_f64());
        tern_vs_two.push(tern / two);
        println!(
            "         tern up, two calls per batch {two:>7.2}s ({:>9.0}/s)   two-calls/loop {:.3}   tern/two-calls {:.3}",
            bench::rate(n, times[2]),
            two_vs_loop[round],
            tern_vs_two[round]
        );
    }
    ratios.finish();
    if two_calls {
        println!(
            "median two-calls/loop time ratio: {:.3}\nmedian tern/two-calls time ratio: {:.3}",
            bench::median(&two_vs_loop).unwrap_or(f64::NAN),
            bench::median(&tern_vs_two).unwrap_or(f64::NAN)
        );
    }
}
