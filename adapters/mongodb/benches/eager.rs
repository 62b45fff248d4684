//! Eager `add blogpost.likes = 0` + `rename blogpost.text to content` over N documents on a
//! MongoDB wire-protocol server, side by side in one run:
//!
//! - **floor**: one server-side `update_many` doing both changes (no batches, no checkpoint);
//! - **tern up**: the engine with pushdown (batches of `--pushdown-batch` ids, a checkpoint per
//!   batch, lease, census);
//! - **hand loop**: a Rust cursor over the collection, the change made on the client, written
//!   back with `bulkWrite` (`ReplaceOne` per document) per batch;
//! - **migrate-mongo**: `migrate-mongo up` running a migration that does the same `updateMany`
//!   (only with `--migrate-mongo PATH_TO_BIN`).
//!
//! ```sh
//! TERN_BENCH_MONGODB_URL=mongodb://127.0.0.1:27017 \
//!   cargo bench -p tern-mongodb --bench eager -- --entities 1000000 --rounds 3 \
//!     --migrate-mongo node_modules/.bin/migrate-mongo
//! ```
//!
//! `--batch N` sets the hand loop's `bulkWrite` size and tern's client batch (default 1000),
//! `--pushdown-batch N` tern's pushdown batch (default: the engine's, 10,000); tern runs as
//! from a script (no progress bar, so no count of the entities first);
//! `TERN_LOG=tern_mongodb=debug` prints the time of every store call tern makes.

#![allow(clippy::expect_used, clippy::panic, clippy::unwrap_used, missing_docs)] // a benchmark: fail loudly

use std::time::{Duration, Instant};

use futures::TryStreamExt;
use mongodb::bson::{Document, doc};
use mongodb::options::ReplaceOneModel;
use mongodb::{Client, Collection};
use tern_core::migrate::RunOptions;
use tern_testkit::bench::{self, BenchArgs, TEXT};

async fn load(coll: &Collection<Document>, n: usize) {
    let _ = coll.drop().await;
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..n {
        batch.push(doc! {
            "_id": i as i64,
            "title": format!("post number {i}"),
            "text": TEXT,
            "author": format!("user{}", i % 1000),
        });
        if batch.len() == 10_000 {
            coll.insert_many(std::mem::take(&mut batch))
                .await
                .expect("load");
        }
    }
    if !batch.is_empty() {
        coll.insert_many(batch).await.expect("load");
    }
}

async fn check(coll: &Collection<Document>, n: usize) {
    let done = coll
        .count_documents(
            doc! { "likes": 0_i64, "content": { "$exists": true }, "text": { "$exists": false } },
        )
        .await
        .expect("count");
    assert_eq!(done as usize, n, "every document migrated");
}

async fn floor(coll: &Collection<Document>) {
    coll.update_many(
        doc! {},
        doc! { "$set": { "likes": 0_i64, "_v": 1_i64 }, "$rename": { "text": "content" } },
    )
    .await
    .expect("update_many");
}

async fn hand_loop(client: &Client, coll: &Collection<Document>, batch: usize) {
    let mut cursor = coll
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .batch_size(batch as u32)
        .await
        .expect("find");
    let ns = coll.namespace();
    let mut models = Vec::with_capacity(batch);
    while let Some(mut d) = cursor.try_next().await.expect("cursor") {
        let id = d.get("_id").cloned().expect("_id");
        d.insert("likes", 0_i64);
        if let Some(t) = d.remove("text") {
            d.insert("content", t);
        }
        d.insert("_v", 1_i64);
        models.push(
            ReplaceOneModel::builder()
                .namespace(ns.clone())
                .filter(doc! { "_id": id })
                .replacement(d)
                .build(),
        );
        if models.len() >= batch {
            client
                .bulk_write(std::mem::take(&mut models))
                .await
                .expect("bulkWrite");
        }
    }
    if !models.is_empty() {
        client.bulk_write(models).await.expect("bulkWrite");
    }
}

/// `tern up` as a script or CI job runs it: no progress bar, so no count of the
/// entities before the stage (`estimate_totals`); pushdown batches of
/// `pushdown_batch` (default: the engine's, 10,000), client batches of `batch`.
async fn tern_up(url: &str, batch: usize, pushdown_batch: Option<usize>, pushdown: bool) {
    let store = tern_mongodb::open(url).await.expect("open");
    let defaults = RunOptions::default();
    bench::tern_up_with(
        store,
        RunOptions {
            batch_size: batch,
            pushdown_batch_size: pushdown_batch.unwrap_or(defaults.pushdown_batch_size),
            pushdown,
            estimate_totals: false,
            ..defaults
        },
    )
    .await
    .expect("tern up");
}

fn migrate_mongo(bin: &str, url: &str, db: &str) {
    let dir = std::env::temp_dir().join(format!("tern-bench-mm-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("migrations")).expect("mkdir");
    std::fs::write(
        dir.join("migrate-mongo-config.js"),
        format!(
            "module.exports = {{ mongodb: {{ url: {url:?}, databaseName: {db:?}, options: {{}} }}, \
             migrationsDir: 'migrations', changelogCollectionName: 'changelog', \
             migrationFileExtension: '.js', useFileHash: false, moduleSystem: 'commonjs' }};\n"
        ),
    )
    .expect("config");
    std::fs::write(
        dir.join("migrations/20260101000000-release2.js"),
        "module.exports = {\n  async up(db) {\n    await db.collection('blogpost').updateMany({}, \
         { $set: { likes: 0 }, $rename: { text: 'content' } });\n  },\n  async down() {}\n};\n",
    )
    .expect("migration");
    let status = std::process::Command::new(bin)
        .arg("up")
        .current_dir(&dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run migrate-mongo");
    assert!(status.success(), "migrate-mongo up failed");
    let _ = std::fs::remove_dir_all(&dir);
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[tokio::main]
async fn main() {
    // `TERN_LOG=tern_mongodb=debug` prints the time of every store call of the run.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TERN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let a = BenchArgs::parse(1_000_000, 1);
    let url = std::env::var("TERN_BENCH_MONGODB_URL")
        .unwrap_or_else(|_| "mongodb://127.0.0.1:27017".to_owned());
    let migrate_mongo_bin = a.value("--migrate-mongo").map(str::to_owned);
    let pushdown_batch = a
        .value("--pushdown-batch")
        .map(|v| v.parse::<usize>().expect("--pushdown-batch needs a number"));
    let client = Client::with_uri_str(&url).await.expect("connect");
    let hello = client
        .database("admin")
        .run_command(doc! { "buildInfo": 1 })
        .await
        .map(|d| d.get_str("version").unwrap_or("?").to_owned())
        .unwrap_or_else(|_| "?".to_owned());
    println!(
        "eager add+rename, {} documents, batch {} (hand loop, tern's client path), tern pushdown batch {}, server {} (reports version {hello})",
        a.entities,
        a.batch,
        pushdown_batch.unwrap_or(RunOptions::default().pushdown_batch_size),
        url
    );
    let run = std::process::id();
    let contenders: Vec<&str> = {
        let mut c = vec![
            "floor (one update_many)",
            "tern up (pushdown)",
            "hand loop (cursor + bulkWrite)",
        ];
        if migrate_mongo_bin.is_some() {
            c.push("migrate-mongo (updateMany)");
        }
        c
    };
    // Each round runs every contender on a freshly loaded database, starting one
    // contender later each round so that none always meets the same server state.
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); contenders.len()];
    for round in 0..a.rounds.max(1) {
        for j in 0..contenders.len() {
            let i = (j + round) % contenders.len();
            let name = contenders[i];
            let db_name = format!("tern_bench_{run}_{i}");
            let db = client.database(&db_name);
            let coll = db.collection::<Document>("blogpost");
            load(&coll, a.entities).await;
            let t = Instant::now();
            match i {
                0 => floor(&coll).await,
                1 => {
                    tern_up(
                        &format!("{}/{db_name}", url.trim_end_matches('/')),
                        a.batch,
                        pushdown_batch,
                        a.pushdown,
                    )
                    .await
                }
                2 => hand_loop(&client, &coll, a.batch).await,
                _ => migrate_mongo(migrate_mongo_bin.as_deref().unwrap_or(""), &url, &db_name),
            }
            let took = t.elapsed();
            check(&coll, a.entities).await;
            println!(
                "round {}: {name:<34} {:>8.2}s ({:>9.0}/s)",
                round + 1,
                secs(took),
                a.entities as f64 / secs(took)
            );
            times[i].push(took);
            db.drop().await.expect("drop");
        }
    }
    let median = |t: &[Duration]| {
        let mut t = t.to_vec();
        t.sort();
        t[t.len() / 2]
    };
    let floor_t = secs(median(&times[0]));
    println!("median of {} round(s):", a.rounds.max(1));
    for (name, t) in contenders.iter().zip(&times) {
        let m = secs(median(t));
        println!(
            "{name:<34} {m:>8.2}s ({:>9.0}/s) {:.2}x the floor",
            a.entities as f64 / m,
            m / floor_t
        );
    }
}
