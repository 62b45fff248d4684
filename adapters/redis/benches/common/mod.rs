//! What the Redis benchmarks share: the server's URL and connections, flushing
//! a database and deleting a key prefix.

#![allow(dead_code)] // each benchmark uses its own part

pub(crate) mod amico;

use std::sync::Arc;

use redis::aio::MultiplexedConnection;
use tern_core::store::Store;

/// `TERN_BENCH_REDIS_URL` (default `redis://127.0.0.1:6379`), without a
/// trailing slash. Benchmarks talk to 127.0.0.1 only.
pub(crate) fn base_url() -> String {
    let url = std::env::var("TERN_BENCH_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    assert!(
        url.contains("127.0.0.1"),
        "benchmarks talk to 127.0.0.1 only"
    );
    url.trim_end_matches('/').to_owned()
}

/// A multiplexed connection of the driver to `url`.
pub(crate) async fn connect(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

/// tern's Redis store at `url`.
pub(crate) async fn open(url: &str) -> Arc<dyn Store> {
    let config = tern_redis::RedisConfig::from_url(url).expect("url");
    Arc::new(tern_redis::RedisStore::connect(config).await.expect("open"))
}

/// Empties the database of `url`. `ASYNC`: a synchronous flush of a million
/// keys outlasts the client's timeout.
pub(crate) async fn flush(url: &str) {
    let mut conn = connect(url).await;
    flush_conn(&mut conn).await;
}

/// [`flush`] over an open connection.
pub(crate) async fn flush_conn(conn: &mut MultiplexedConnection) {
    let _: () = redis::cmd("FLUSHDB")
        .arg("ASYNC")
        .query_async(conn)
        .await
        .expect("flushdb");
}

/// Deletes every key under `prefix:` of the database of `url`.
pub(crate) async fn delete_prefix(url: &str, prefix: &str) {
    let mut conn = connect(url).await;
    unlink_matching(&mut conn, &format!("{prefix}:*")).await;
}

/// `UNLINK`s every key matching `pattern` on the server of `conn`.
pub(crate) async fn unlink_matching(conn: &mut MultiplexedConnection, pattern: &str) {
    scan_apply(conn, pattern, 5000, |keys, pipe| {
        for k in keys {
            pipe.cmd("UNLINK").arg(k).ignore();
        }
    })
    .await;
}

/// One whole SCAN of `pattern` on the server of `conn`, `count` keys a step:
/// `commands` adds what to run on each step's keys to a pipeline, sent on the
/// same connection (nothing is sent when it adds nothing).
pub(crate) async fn scan_apply(
    conn: &mut MultiplexedConnection,
    pattern: &str,
    count: usize,
    mut commands: impl FnMut(&[String], &mut redis::Pipeline),
) {
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count)
            .query_async(conn)
            .await
            .expect("scan");
        let mut pipe = redis::pipe();
        commands(&keys, &mut pipe);
        if !pipe.is_empty() {
            let _: () = pipe.query_async(conn).await.expect("pipeline");
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}
