//! The [MC] experiment (Fig. 4) on tern's stores: N concurrent writers each
//! add one comment with optimistic concurrency (read, then tern's
//! compare-and-set `Write::Replace`), once without retry and once with up to
//! `--retries` retries, against
//! - the article-oriented layout: one article entity holding all comments
//!   (one MongoDB document with embedded comments, one Redis hash, one
//!   Cassandra partition), and
//! - the user-oriented layout: each comment goes into its author's entity.
//!
//! Prints, per store, layout, N and mode: failed-write share, lost updates
//! (acknowledged comments missing at the end), attempts per write and
//! throughput; and the checker's verdict on `examples/contention/*.mc` next
//! to it. Uses a fresh database / key prefix / keyspace on the shared servers
//! (`TERN_IT_*_URL`, see integration-tests) and removes it afterwards.
//!
//! ```sh
//! eval "$(scripts/servers.sh env)"
//! cargo bench -p tern-integration-tests --bench contention -- --sizes 20,100,500,1000 --retries 20
//! ```

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, StoreExt, Write, WriteOutcome};
use tokio::sync::Barrier;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    Article,
    User,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Article => "article-oriented",
            Layout::User => "user-oriented",
        }
    }
}

#[derive(Default)]
struct Stats {
    ok: u64,
    failed: u64,
    errors: u64,
    attempts: u64,
    stored: u64,
    elapsed: Duration,
}

fn comment(by: usize) -> Value {
    let mut m = Map::new();
    m.insert("by".into(), Value::String(format!("u{by}")));
    m.insert("text".into(), Value::String(format!("comment by u{by}")));
    Value::Map(m)
}

fn empty(kind: &str, id: String) -> Entity {
    let mut m = Map::new();
    m.insert("comments".into(), Value::Array(Vec::new()));
    Entity::new(Key::new(kind, id).expect("key"), m)
}

fn comments_of(e: &Entity) -> usize {
    match e.value.get("comments") {
        Some(Value::Array(v)) => v.len(),
        _ => 0,
    }
}

/// One writer: read the group, append, compare-and-set; retry on conflict.
async fn write_one(store: &dyn Store, key: &Key, by: usize, retries: u32) -> (bool, bool, u64) {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let Ok(Some(current)) = store.get(key).await else {
            return (false, true, attempts);
        };
        let mut new = current.clone();
        if let Some(Value::Array(v)) = new.value.get_mut("comments") {
            v.push(comment(by));
        }
        match store
            .write_batch(vec![Write::Replace {
                expected: current,
                new,
            }])
            .await
        {
            Ok(o) if o.first() == Some(&WriteOutcome::Applied) => return (true, false, attempts),
            Ok(_) if attempts <= u64::from(retries) => {
                // A little jitter so that retries do not march in lockstep.
                let ms = (by as u64 * 7 + attempts * 13) % 5 + 1;
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            Ok(_) => return (false, false, attempts),
            Err(_) => return (false, true, attempts),
        }
    }
}

async fn round(store: Arc<dyn Store>, layout: Layout, n: usize, retries: u32, tag: &str) -> Stats {
    let kind = format!("mc_{tag}");
    let keys: Vec<Key> = match layout {
        Layout::Article => vec![Key::new(kind.as_str(), "a1".to_owned()).expect("key")],
        Layout::User => (0..n)
            .map(|i| Key::new(kind.as_str(), format!("u{i}")).expect("key"))
            .collect(),
    };
    for k in &keys {
        store
            .put(empty(
                &kind,
                match &k.id {
                    Value::String(s) => s.clone(),
                    _ => unreachable!(),
                },
            ))
            .await
            .expect("setup");
    }
    let barrier = Arc::new(Barrier::new(n));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..n {
        let store = store.clone();
        let key = keys[if layout == Layout::Article { 0 } else { i }].clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            write_one(store.as_ref(), &key, i, retries).await
        }));
    }
    let mut s = Stats::default();
    for t in tasks {
        let (ok, err, attempts) = t.await.expect("task");
        s.attempts += attempts;
        if ok {
            s.ok += 1;
        } else if err {
            s.errors += 1;
        } else {
            s.failed += 1;
        }
    }
    s.elapsed = start.elapsed();
    for k in &keys {
        if let Some(e) = store.get(k).await.expect("read back") {
            s.stored += comments_of(&e) as u64;
        }
        store.delete(k).await.expect("cleanup");
    }
    s
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn verdict(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/contention")
        .join(file);
    let src = std::fs::read_to_string(&path).expect("example");
    let r = tern_contention::analyze(&src).expect("example parses");
    format!("{:?}", r.verdict).to_uppercase()
}

async fn open(name: &str) -> Result<(Arc<dyn Store>, String), String> {
    match name {
        "mongodb" => {
            let b = tern_integration_tests::mongodb::backend().await?;
            let (s, db) = b.fresh_named().await;
            Ok((s, db))
        }
        "redis" => {
            let b = tern_integration_tests::redis::backend().await?;
            let url = b.fresh_url();
            let s = tern_integration_tests::redis::open(&url)
                .await
                .map_err(|e| e.to_string())?;
            Ok((s, url))
        }
        "cassandra" => {
            let b = tern_integration_tests::cassandra::backend().await?;
            let url = b.fresh_url();
            let s = tern_cassandra::open(&url)
                .await
                .map_err(|e| e.to_string())?;
            Ok((s, url))
        }
        other => Err(format!("unknown store {other}")),
    }
}

async fn drop_place(name: &str, place: &str) {
    match name {
        "mongodb" => {
            if let Ok(url) = std::env::var("TERN_IT_MONGODB_URL")
                && let Ok(c) = mongodb::Client::with_uri_str(&url).await
            {
                let _ = c.database(place).drop().await;
            }
        }
        "cassandra" => {
            if let Ok(b) = tern_integration_tests::cassandra::backend().await
                && let Ok(s) = b.session().await
                && let Some(ks) = place
                    .rsplit('/')
                    .next()
                    .map(|k| k.split('?').next().unwrap_or(k))
            {
                let _ = s
                    .query_unpaged(format!("DROP KEYSPACE IF EXISTS {ks}"), ())
                    .await;
            }
        }
        _ => {} // Redis: the round deleted every key under the fresh prefix.
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes: Vec<usize> = arg("--sizes")
        .unwrap_or_else(|| "20,100,500,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let retries: u32 = arg("--retries").and_then(|s| s.parse().ok()).unwrap_or(20);
    let stores = arg("--stores").unwrap_or_else(|| "mongodb,redis,cassandra".into());
    let (va, vu) = (verdict("article.mc"), verdict("user.mc"));
    println!("checker: examples/contention/article.mc {va}, examples/contention/user.mc {vu}");
    println!();
    println!(
        "| store | layout (verdict) | N | retries | failed writes | lost updates | attempts/write | writes/s |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut predicted = true;
    for name in stores.split(',') {
        let (store, place) = match open(name).await {
            Ok(x) => x,
            Err(why) => {
                println!("| {name} | skipped: {why} | | | | | | | |");
                continue;
            }
        };
        let mut tag = 0;
        for &n in &sizes {
            for r in [0, retries] {
                for layout in [Layout::Article, Layout::User] {
                    tag += 1;
                    let s = round(store.clone(), layout, n, r, &format!("{tag}")).await;
                    let v = if layout == Layout::Article { &va } else { &vu };
                    let failed = s.failed as f64 / n as f64 * 100.0;
                    let lost = s.ok.saturating_sub(s.stored);
                    // UNSAFE should show contention (failures or lost updates without retries), SAFE none.
                    let contended = s.failed > 0 || lost > 0 || s.attempts > n as u64;
                    if r == 0 && n >= 20 && ((v == "UNSAFE") != contended) {
                        predicted = false;
                    }
                    println!(
                        "| {name} | {} ({v}) | {n} | {r} | {failed:.1} % | {lost} | {:.2} | {:.0} |{}",
                        layout.name(),
                        s.attempts as f64 / n as f64,
                        s.ok as f64 / s.elapsed.as_secs_f64(),
                        if s.errors > 0 {
                            format!(" {} errors", s.errors)
                        } else {
                            String::new()
                        }
                    );
                }
            }
        }
        drop_place(name, &place).await;
    }
    println!();
    println!(
        "the checker's verdict predicts the measured contention (UNSAFE: failed or lost writes; SAFE: none): {}",
        if predicted { "yes" } else { "NO" }
    );
}
