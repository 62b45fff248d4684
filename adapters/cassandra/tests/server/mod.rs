//! The real Cassandra node the adapter's tests run against: `TERN_IT_CASSANDRA_URL`
//! (`scripts/servers.sh start cassandra; eval "$(scripts/servers.sh env)"`), each test in
//! keyspaces of its own. Without the variable a test prints why and returns (skipped).

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable naming the server.
pub(crate) const URL_VAR: &str = "TERN_IT_CASSANDRA_URL";

/// `host:port[,host:port]` of the server, or `None` after printing why `test` is skipped.
pub(crate) fn nodes(test: &str) -> Option<String> {
    let url = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty());
    let Some(url) = url else {
        eprintln!(
            "{test}: skipped: {URL_VAR} is not set (scripts/servers.sh start cassandra; \
             eval \"$(scripts/servers.sh env)\")"
        );
        return None;
    };
    let rest = url.split_once("://").map_or(url.as_str(), |(_, r)| r);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    Some(
        authority
            .rsplit_once('@')
            .map_or(authority, |(_, h)| h)
            .to_owned(),
    )
}

/// A keyspace name no other test of any run uses (`prefix_<time><pid>_<n>`).
pub(crate) fn unique_keyspace(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{prefix}_{:x}{:x}_{}",
        nanos % (1 << 40),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}
