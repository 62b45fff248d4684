//! Eager `add` + `rename` over N entities on the Cassandra node of `TERN_IT_CASSANDRA_URL`: `tern up` through the adapter against a
//! hand-written paging + prepared-update loop with the same driver, side by side in one run.
//!
//! ```sh
//! cargo bench -p tern-cassandra --bench eager -- --entities 100000 --rounds 3 [--lwt-loop] [--native]
//! ```
//!
//! `--native`: tern migrates the same native table as the loop (`native=blogpost`), loaded the
//! same way, instead of its document layout.
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used, missing_docs)]

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use tern_testkit::bench::{self, BenchArgs, Ratios, TEXT};

const CONCURRENCY: usize = 32;

/// `host:port` of the server: `TERN_IT_CASSANDRA_URL`'s (`scripts/servers.sh start cassandra`).
fn server() -> String {
    let Some(url) = std::env::var("TERN_IT_CASSANDRA_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
    else {
        eprintln!(
            "TERN_IT_CASSANDRA_URL is not set: start a Cassandra node first \
             (scripts/servers.sh start cassandra; eval \"$(scripts/servers.sh env)\")"
        );
        std::process::exit(2);
    };
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    rest.split(['/', '?']).next().unwrap_or(rest).to_owned()
}

async fn session(addr: &str) -> Session {
    SessionBuilder::new()
        .known_node(addr)
        .auto_await_schema_agreement(false)
        .fetch_schema_metadata(false)
        .build()
        .await
        .expect("session")
}

/// The hand loop's table: native columns, `likes` and `content` already there (the test server
/// has no `ALTER TABLE`; on a real cluster the loop would add them first), and tern's version
/// column (unused by the loop), so that with `--native` both sides migrate the same table.
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
             text text, author text, likes int, content text, tern_version bigint)"
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

/// The baseline: page through the table (every value a bind marker: the test server counts
/// literals among the bound columns) with the driver's paging state, update each row with a
/// prepared statement (`CONCURRENCY` at a time). No checkpoint, no lease, no census.
async fn hand_loop(s: &Session, ks: &str, batch: usize, lwt: bool) -> u64 {
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
            ControlFlow::Break(()) => return done,
        }
    }
}

#[tokio::main]
async fn main() {
    let a = BenchArgs::parse(100_000, 3);
    // The hand loop guards each update with `IF text = ?` (an LWT), like tern's CAS.
    let lwt_loop = a.flag("--lwt-loop");
    // tern migrates a native table like the loop's instead of its document layout.
    let native = a.flag("--native");
    let addr = server();
    println!(
        "eager add+rename, cassandra at {addr}, {} entities, batch {}, {} round(s), hand loop {}, \
         tern on {}",
        a.entities,
        a.batch,
        a.rounds,
        if lwt_loop {
            "with LWT"
        } else {
            "plain updates"
        },
        if native {
            "the same native table"
        } else {
            "its document layout"
        }
    );
    let loop_session = session(&addr).await;
    let run = std::process::id();
    let mut ratios = Ratios::new("loop");
    for round in 0..a.rounds {
        let loop_ks = format!("bench_loop_{run}_{round}");
        let tern_ks = format!("bench_tern_{run}_{round}");
        let t = Instant::now();
        load_native(&loop_session, &loop_ks, a.entities).await;
        let tern_store = if native {
            // The same table, loaded the same way; emptied columns kept (no DROP here).
            load_native(&loop_session, &tern_ks, a.entities).await;
            tern_cassandra::open(&format!(
                "cassandra://{addr}/{tern_ks}?native=blogpost&drop_columns=false"
            ))
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
            "round {}: loaded both in {:.1}s",
            round + 1,
            t.elapsed().as_secs_f64()
        );
        let ((n_loop, t_loop), (n_tern, t_tern)) = bench::in_turn(
            round,
            hand_loop(&loop_session, &loop_ks, a.batch, lwt_loop),
            bench::tern_up(Arc::clone(&tern_store), a.batch, a.pushdown),
        )
        .await;
        let n_tern = n_tern.expect("tern up");
        assert_eq!(n_loop as usize, a.entities);
        assert_eq!(n_tern as usize, a.entities);
        ratios.record(round, (n_loop, t_loop), (n_tern, t_tern));
    }
    ratios.finish();
}
