//! Eager `add` + `rename` over N entities on Cassandra (tern-cql-server on 127.0.0.1 unless
//! `TERN_IT_CASSANDRA_URL` names another server): `tern up` through the adapter against a
//! hand-written paging + prepared-update loop with the same driver, side by side in one run.
//!
//! ```sh
//! cargo bench -p tern-cassandra --bench eager -- --entities 100000 --rounds 3
//! ```
#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used, missing_docs)]

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::response::PagingState;
use tern_core::migrate::{LeaseOptions, Migration, MigrationSet, Migrator, RunOptions};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};

const SCRIPT: &str = "add blogpost.likes = 0\nrename blogpost.text to content\n";
const TEXT: &str = "NoSQL databases are often schema-less; their data is not.";
const CONCURRENCY: usize = 32;

struct Args {
    entities: usize,
    batch: usize,
    rounds: usize,
    lwt_loop: bool,
}

fn args() -> Args {
    let mut a = Args {
        entities: 100_000,
        batch: 1000,
        rounds: 3,
        lwt_loop: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match arg.as_str() {
            "--entities" => a.entities = num("--entities"),
            "--batch" => a.batch = num("--batch"),
            "--rounds" => a.rounds = num("--rounds"),
            // The hand loop guards each update with `IF text = ?` (an LWT), like tern's CAS.
            "--lwt-loop" => a.lwt_loop = true,
            _ => {}
        }
    }
    a
}

/// `host:port` of the server: `TERN_IT_CASSANDRA_URL`'s, or an in-process tern-cql-server on
/// its own runtime (its own threads, as a separate process would have).
fn server() -> String {
    if let Ok(url) = std::env::var("TERN_IT_CASSANDRA_URL") {
        let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
        return rest.split(['/', '?']).next().unwrap_or(rest).to_owned();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap().to_string()).unwrap();
            tern_cql_server::CqlServer::new().serve(listener).await;
        });
    });
    rx.recv().expect("server address")
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

fn entity(i: usize) -> Entity {
    let mut v = Map::new();
    v.insert("title".into(), Value::from(format!("post number {i}")));
    v.insert("text".into(), Value::from(TEXT));
    v.insert("author".into(), Value::from(format!("user{}", i % 1000)));
    Entity::new(Key::new("blogpost", i as i64).unwrap(), v)
}

async fn load_tern(store: &dyn Store, n: usize) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let writes = chunk.iter().map(|&i| Write::Put(entity(i))).collect();
        store.write_batch(writes).await.expect("load");
    }
}

/// The hand loop's table: native columns, `likes` and `content` already there (the test server
/// has no `ALTER TABLE`; on a real cluster the loop would add them first).
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
             text text, author text, likes int, content text)"
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

async fn tern_up(store: Arc<dyn Store>, batch: usize) -> u64 {
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(1, "release2", "0001_release2.tern", SCRIPT).expect("script"))
        .expect("add");
    let report = Migrator::new(store, set)
        .with_run_options(RunOptions {
            batch_size: batch,
            ..RunOptions::default()
        })
        .with_lease_options(LeaseOptions::default())
        .up(None)
        .await
        .expect("tern up");
    report.applied[0].counts.processed
}

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

#[tokio::main]
async fn main() {
    let a = args();
    let addr = server();
    println!(
        "eager add+rename, cassandra at {addr}, {} entities, batch {}, {} round(s), hand loop {}",
        a.entities,
        a.batch,
        a.rounds,
        if a.lwt_loop {
            "with LWT"
        } else {
            "plain updates"
        }
    );
    let loop_session = session(&addr).await;
    let run = std::process::id();
    let mut ratios = Vec::new();
    for round in 0..a.rounds {
        let loop_ks = format!("bench_loop_{run}_{round}");
        let tern_store =
            tern_cassandra::open(&format!("cassandra://{addr}/bench_tern_{run}_{round}"))
                .await
                .expect("open");
        let t = Instant::now();
        load_native(&loop_session, &loop_ks, a.entities).await;
        load_tern(tern_store.as_ref(), a.entities).await;
        println!(
            "round {}: loaded both in {:.1}s",
            round + 1,
            t.elapsed().as_secs_f64()
        );
        let (loop_time, tern_time, n_loop, n_tern);
        if round % 2 == 0 {
            let t = Instant::now();
            n_loop = hand_loop(&loop_session, &loop_ks, a.batch, a.lwt_loop).await;
            loop_time = t.elapsed();
            let t = Instant::now();
            n_tern = tern_up(Arc::clone(&tern_store), a.batch).await;
            tern_time = t.elapsed();
        } else {
            let t = Instant::now();
            n_tern = tern_up(Arc::clone(&tern_store), a.batch).await;
            tern_time = t.elapsed();
            let t = Instant::now();
            n_loop = hand_loop(&loop_session, &loop_ks, a.batch, a.lwt_loop).await;
            loop_time = t.elapsed();
        }
        assert_eq!(n_loop as usize, a.entities);
        assert_eq!(n_tern as usize, a.entities);
        let ratio = tern_time.as_secs_f64() / loop_time.as_secs_f64();
        ratios.push(ratio);
        println!(
            "round {}: hand loop {:>7.2}s ({:>8.0}/s)   tern up {:>7.2}s ({:>8.0}/s)   tern/loop {:.3}",
            round + 1,
            loop_time.as_secs_f64(),
            rate(n_loop, loop_time),
            tern_time.as_secs_f64(),
            rate(n_tern, tern_time),
            ratio
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median tern/loop time ratio: {:.3}",
        ratios[ratios.len() / 2]
    );
}
