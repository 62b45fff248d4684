//! tern's server module (`tern-redis-module`, docs/module.md) seen from this
//! adapter: detected once at connect (`MODULE LIST` names `tern`), and the
//! spec pushed to the masters of a cluster that do not hold the state key.
//!
//! With the module loaded, the server migrates every entity a command names
//! before the command runs, so the lazy client's reads need no script: the
//! store declines `get_advanced` (no round trip) and the client reads with plain
//! commands, which return migrated entities.

use redis::aio::ConnectionLike;
use tern_core::store::{Error, ErrorKind, Result};

use crate::config::RedisConfig;

/// The module's name in `MODULE LIST`.
pub const MODULE_NAME: &str = "tern";

/// Whether the server (or the cluster node answering) has tern's module loaded.
/// A server that refuses `MODULE LIST` (ACLs) counts as without it.
pub(crate) async fn detect(conn: &mut impl ConnectionLike) -> bool {
    let Ok(list) = redis::cmd("MODULE")
        .arg("LIST")
        .query_async::<redis::Value>(conn)
        .await
    else {
        return false;
    };
    names_tern(&list)
}

fn names_tern(v: &redis::Value) -> bool {
    match v {
        redis::Value::Array(items) | redis::Value::Set(items) => {
            items.windows(2).any(|w| {
                matches!(&w[0], redis::Value::BulkString(k) if k == b"name")
                    && matches!(&w[1], redis::Value::BulkString(n) if n == MODULE_NAME.as_bytes())
            }) || items.iter().any(names_tern)
        }
        redis::Value::Map(pairs) => pairs.iter().any(|(k, n)| {
            matches!(k, redis::Value::BulkString(k) if k == b"name")
                && matches!(n, redis::Value::BulkString(n) if n == MODULE_NAME.as_bytes())
        }),
        _ => false,
    }
}

/// Sends tern's state document to every master of the cluster named by `url`
/// (`TERN.LOADSPEC`): a node that does not hold the state key refuses the
/// namespace (`TERNNOSPEC`) until it has the spec. Run it after `tern up`,
/// `tern sweep` and `tern gc` on a cluster, and after a node restarts. On one
/// server the module reads the state itself (nothing to do). Returns the
/// number of nodes that took the spec.
///
/// # Errors
/// `Unavailable` when a node cannot be reached; `InvalidData` when a node
/// refuses the spec (no module loaded there).
pub async fn push_spec(url: &str) -> Result<usize> {
    let config = RedisConfig::from_url(url)?;
    let keys = crate::codec::Keys::new(&config);
    let state_key = keys.meta_key(tern_core::migrate::state::STATE_DOC);
    let fail = |what: &str, e: redis::RedisError| {
        Error::new(ErrorKind::Unavailable, format!("{what}: {e}"))
            .with_context("url", config.redacted.clone())
    };
    let client = redis::Client::open(config.connection.as_str())
        .map_err(|e| fail("the Redis URL is not valid", e))?;
    let mut seed = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| fail("connecting", e))?;
    let mut nodes = vec![config.connection.clone()];
    if config.cluster {
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut seed)
            .await
            .map_err(|e| fail("CLUSTER NODES", e))?;
        nodes = text
            .lines()
            .filter(|l| l.contains("master") && !l.contains("fail"))
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter_map(|a| a.split('@').next())
            .map(|a| with_host(&config.connection, a))
            .collect();
    }
    let mut conns = Vec::new();
    let mut doc = None;
    for n in &nodes {
        let c = redis::Client::open(n.as_str()).map_err(|e| fail("a node's address", e))?;
        let mut c = c
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| fail("connecting to a node", e))?;
        if doc.is_none()
            && let Ok((Some(d), Some(r))) = redis::cmd("HMGET")
                .arg(&state_key)
                .arg("doc")
                .arg("rev")
                .query_async::<(Option<String>, Option<String>)>(&mut c)
                .await
        {
            doc = Some((r, d));
        }
        conns.push(c);
    }
    // No state document yet: an empty one (nothing pending) lifts the nodes' refusal.
    let (rev, doc) = doc.unwrap_or_default();
    for c in &mut conns {
        let _: () = redis::cmd("TERN.LOADSPEC")
            .arg(&rev)
            .arg(&doc)
            .query_async(c)
            .await
            .map_err(|e| {
                Error::new(
                    ErrorKind::InvalidData,
                    format!("a node refused TERN.LOADSPEC (is the module loaded?): {e}"),
                )
            })?;
    }
    Ok(conns.len())
}

/// `connection` (a redis:// URL) pointed at `addr` (`host:port`), credentials kept.
fn with_host(connection: &str, addr: &str) -> String {
    let (scheme, rest) = connection
        .split_once("://")
        .unwrap_or(("redis", connection));
    let (auth, hostpart) = match rest.rsplit_once('@') {
        Some((a, h)) => (format!("{a}@"), h),
        None => (String::new(), rest),
    };
    let tail = hostpart.find('/').map(|i| &hostpart[i..]).unwrap_or("");
    format!("{scheme}://{auth}{addr}{tail}")
}

/// The refusal of `get_advanced` when the module is loaded (the lazy client
/// then reads with plain commands, which the module answers migrated).
pub(crate) fn declined() -> Error {
    Error::new(
        ErrorKind::Unsupported,
        "tern's server module migrates entities on the server: plain reads instead",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_list_replies_are_read_in_both_protocols() {
        use redis::Value::{Array, BulkString, Int, Map};
        let entry = vec![
            BulkString(b"name".to_vec()),
            BulkString(b"tern".to_vec()),
            BulkString(b"ver".to_vec()),
            Int(1),
        ];
        assert!(names_tern(&Array(vec![Array(entry.clone())])));
        assert!(names_tern(&Array(vec![Map(vec![(
            BulkString(b"name".to_vec()),
            BulkString(b"tern".to_vec())
        )])])));
        assert!(!names_tern(&Array(vec![Array(vec![
            BulkString(b"name".to_vec()),
            BulkString(b"search".to_vec())
        ])])));
        assert!(!names_tern(&Array(vec![])));
    }

    #[test]
    fn node_urls_keep_credentials_and_database() {
        assert_eq!(
            with_host("redis://:pw@h:1/0", "127.0.0.2:7102"),
            "redis://:pw@127.0.0.2:7102/0"
        );
        assert_eq!(with_host("redis://h:1", "a:2"), "redis://a:2");
    }
}
