//! What every backend fixture shares.

use std::sync::atomic::{AtomicU64, Ordering};

/// The value of an environment variable, if set and not empty.
pub fn env(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// A name no other test of any run uses: `prefix_<random>_<counter>`, made of
/// lowercase letters, digits and `_` (valid as a MongoDB database, a Redis key
/// prefix and a Cassandra keyspace).
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}_{}_{n}", &random[..10])
}
