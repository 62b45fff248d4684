//! Eager `add` + `rename` over N entities on the Cassandra node of `TERN_IT_CASSANDRA_URL`: `tern up` through the adapter against a
//! hand-written paging + prepared-update loop with the same driver, side by side in one run.
//!
//! ```sh
//! cargo bench -p tern-cassandra --bench eager -- --entities 100000 --rounds 3 [--native]
//! ```
//!
//! Three sides a round, in an order that turns each round: `tern up`, the hand loop with each
//! update guarded by an LWT (`IF text = ?`, like tern's compare-and-set), and the floor, the
//! same loop with unconditional updates. `--native`: tern migrates the same native table as
//! the loops (`native=blogpost`), loaded the same way, instead of its document layout.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used, missing_docs)]

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use scylla::client::session::Session;
use scylla::response::PagingState;
use tern_testkit::bench::{self, BenchArgs, Ratios, TEXT};

mod common;
use common::{server, session};

const CONCURRENCY: usize = 32;

/// The hand loop's table as an application has it before release 2: native columns
/// `(id, title, text, author)`, loaded with a prepared `INSERT`, `CONCURRENCY` at a time.
async fn load_native(s: &Session, ks: &str, n: usize) {
    s.query_unpaged(
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = \
             {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ),
        &[],
    )
    .await
    .unwrap();
    s.query_unpaged(
        format!(
            "CREATE TABLE IF NOT EXISTS {ks}.blogpost (id bigint PRIMARY KEY, title text, \
             text text, author text)"
        ),
        &[],
    )
    .await
    .unwrap();
    let insert = s
        .prepare(format!(
            "INSERT INTO {ks}.blogpost (id, title, text, author) VALUES (?, ?, ?, ?)"
        ))
        .await
        .unwrap();
    futures::stream::iter(0..n)
        .map(|i| {
            let insert = &insert;
            async move {
                s.execute_unpaged(
                    insert,
                    (
                        i as i64,
                        format!("post number {i}"),
                        TEXT,
                        format!("user{}", i % 1000),
                    ),
                )
                .await
                .unwrap();
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<()>>()
        .await;
}

/// The baseline, what a careful engineer writes with the same driver: `ALTER TABLE ... ADD
/// likes int` and `ADD content text`, page through `SELECT id, text` with the driver's paging
/// state (`batch` rows a page), update each row with a prepared statement (`CONCURRENCY` at a
/// time; with `lwt`, guarded by `IF text = ?`), then `DROP text`. No checkpoint, no lease, no
/// census.
async fn hand_loop(s: &Session, ks: &str, batch: usize, lwt: bool) -> u64 {
    for ddl in ["ADD likes int", "ADD content text"] {
        s.query_unpaged(format!("ALTER TABLE {ks}.blogpost {ddl}"), &[])
            .await
            .unwrap();
    }
    s.await_schema_agreement().await.unwrap();
    let mut select = s
        .prepare(format!("SELECT id, text FROM {ks}.blogpost"))
        .await
        .unwrap();
    select.set_page_size(batch as i32);
    let update = s
        .prepare(if lwt {
            format!(
                "UPDATE {ks}.blogpost SET likes = ?, content = ?, text = ? WHERE id = ? IF text = ?"
            )
        } else {
            format!("UPDATE {ks}.blogpost SET likes = ?, content = ?, text = ? WHERE id = ?")
        })
        .await
        .unwrap();
    let mut state = PagingState::start();
    let mut done = 0u64;
    loop {
        let (result, next) = s.execute_single_page(&select, (), state).await.unwrap();
        let rows: Vec<(i64, Option<String>)> = result
            .into_rows_result()
            .unwrap()
            .rows::<(i64, Option<String>)>()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let todo: Vec<(i64, String)> = rows
            .into_iter()
            .filter_map(|(id, text)| text.map(|t| (id, t)))
            .collect();
        done += todo.len() as u64;
        futures::stream::iter(todo)
            .map(|(id, text)| {
                let update = &update;
                async move {
                    if lwt {
                        s.execute_unpaged(update, (0_i32, text.clone(), None::<String>, id, text))
                            .await
                            .unwrap();
                    } else {
                        s.execute_unpaged(update, (0_i32, text, None::<String>, id))
                            .await
                            .unwrap();
                    }
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<()>>()
            .await;
        match next.into_paging_control_flow() {
            ControlFlow::Continue(next) => state = next,
            ControlFlow::Break(()) => break,
        }
    }
    s.query_unpaged(format!("ALTER TABLE {ks}.blogpost DROP text"), &[])
        .await
        .unwrap();
    done
}

/// Drops a round's keyspace (not timed), so that rounds do not fill the node's disk.
async fn drop_keyspace(s: &Session, ks: &str) {
    s.query_unpaged(format!("DROP KEYSPACE IF EXISTS {ks}"), &[])
        .await
        .unwrap();
}

/// One side of a round: what it is called and how many rows it migrated in what time.
type Side = (&'static str, (u64, std::time::Duration));

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(100_000, 3);
    // tern migrates a native table like the loops' instead of its document layout.
    let native = a.flag("--native");
    let addr = server();
    println!(
        "eager add+rename, cassandra at {addr}, {} entities, batch {}, {} round(s), tern on {}",
        a.entities,
        a.batch,
        a.rounds,
        if native {
            "the same native table"
        } else {
            "its document layout"
        }
    );
    let loop_session = session(&addr).await;
    let run = std::process::id();
    let mut lwt_ratios = Ratios::new("LWT loop");
    let mut plain_ratios = Ratios::new("plain loop");
    for round in 0..a.rounds {
        let plain_ks = format!("bench_plain_{run}_{round}");
        let lwt_ks = format!("bench_lwt_{run}_{round}");
        let tern_ks = format!("bench_tern_{run}_{round}");
        let t = Instant::now();
        load_native(&loop_session, &plain_ks, a.entities).await;
        load_native(&loop_session, &lwt_ks, a.entities).await;
        let tern_store = if native {
            load_native(&loop_session, &tern_ks, a.entities).await;
            tern_cassandra::open(&format!("cassandra://{addr}/{tern_ks}?native=blogpost"))
                .await
                .expect("open")
        } else {
            let store = tern_cassandra::open(&format!("cassandra://{addr}/{tern_ks}"))
                .await
                .expect("open");
            bench::load(store.as_ref(), a.entities).await.expect("load");
            store
        };
        println!(
            "round {}: loaded three keyspaces in {:.1}s",
            round + 1,
            t.elapsed().as_secs_f64()
        );
        // The three sides one after the other, the order turned by one each round.
        let mut sides: Vec<Side> = Vec::new();
        for turn in 0..3 {
            match (turn + round) % 3 {
                0 => {
                    let (n, d) =
                        bench::timed(hand_loop(&loop_session, &plain_ks, a.batch, false)).await;
                    sides.push(("plain", (n, d)));
                }
                1 => {
                    let (n, d) =
                        bench::timed(hand_loop(&loop_session, &lwt_ks, a.batch, true)).await;
                    sides.push(("lwt", (n, d)));
                }
                _ => {
                    let (n, d) =
                        bench::timed(bench::tern_up(Arc::clone(&tern_store), a.batch, a.pushdown))
                            .await;
                    sides.push(("tern", (n.expect("tern up"), d)));
                }
            }
        }
        let side = |name: &str| {
            sides
                .iter()
                .find(|(s, _)| *s == name)
                .map(|(_, r)| *r)
                .expect("side")
        };
        for name in ["plain", "lwt", "tern"] {
            assert_eq!(
                side(name).0 as usize,
                a.entities,
                "{name} migrated every row"
            );
        }
        lwt_ratios.record(round, side("lwt"), side("tern"));
        plain_ratios.record(round, side("plain"), side("tern"));
        for ks in [&plain_ks, &lwt_ks, &tern_ks] {
            drop_keyspace(&loop_session, ks).await;
        }
    }
    lwt_ratios.finish();
    plain_ratios.finish();
}
