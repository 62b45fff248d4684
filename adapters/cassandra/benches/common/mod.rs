//! What the Cassandra benches share: the node they run against and a driver session on it.

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;

/// `host:port` of the node of `TERN_IT_CASSANDRA_URL` (`scripts/servers.sh start cassandra`);
/// exits with a message when the variable is not set.
pub(crate) fn server() -> String {
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

/// A session of the same driver on `addr`, configured as the adapter's (no schema metadata,
/// no automatic schema agreement; the driver's default consistency, `LOCAL_QUORUM`, is the
/// adapter's default too).
pub(crate) async fn session(addr: &str) -> Session {
    SessionBuilder::new()
        .known_node(addr)
        .auto_await_schema_agreement(false)
        .fetch_schema_metadata(false)
        .build()
        .await
        .expect("session")
}
