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
    let mut cursor: u64 = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}:*"))
            .arg("COUNT")
            .arg(5000)
            .query_async(&mut conn)
            .await
            .expect("scan");
        if !keys.is_empty() {
            let _: () = redis::cmd("UNLINK")
                .arg(keys)
                .query_async(&mut conn)
                .await
                .expect("unlink");
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
}
