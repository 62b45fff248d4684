//! The partitions of a kind ([`tern_core::store::Partitions`]) on the server at
//! `TERN_IT_REDIS_URL` and the cluster at `TERN_IT_REDIS_CLUSTER_URL`: the
//! test kit's conformance check (disjoint, covering, written-meanwhile,
//! pushdown per partition), each store under a key prefix of its own. Without
//! the variable, a test prints why and is skipped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use tern_core::store::Store;

/// A store at the URL in `var` under a fresh prefix, or `None` (said on stderr).
async fn store(var: &str, test: &str) -> Option<Arc<dyn Store>> {
    let Ok(url) = std::env::var(var) else {
        eprintln!("{test}: skipped: {var} is not set");
        return None;
    };
    let sep = if url.contains('?') { '&' } else { '?' };
    let prefix = format!("tern_parts_{}", std::process::id());
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Some(
        tern_redis::open(&format!("{url}{sep}prefix={prefix}_{nonce}"))
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot open {var}: {e}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_one_server_are_disjoint_and_cover_the_kind() {
    let Some(store) = store("TERN_IT_REDIS_URL", "partitions on one server").await else {
        return;
    };
    assert!(
        store.features().partitions.is_some(),
        "the Redis store has partitions"
    );
    tern_testkit::conformance::partitions(store.as_ref())
        .await
        .unwrap_or_else(|f| panic!("{f}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_of_a_cluster_are_disjoint_and_cover_the_kind() {
    let Some(store) = store("TERN_IT_REDIS_CLUSTER_URL", "partitions on a cluster").await else {
        return;
    };
    tern_testkit::conformance::partitions(store.as_ref())
        .await
        .unwrap_or_else(|f| panic!("{f}"));
}

/// Split points on one server come out where asked, and a split in 16 of a
/// database of a few keys gives fewer partitions (the buckets of a small
/// table cannot be told apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_names_its_ranges() {
    let Some(store) = store("TERN_IT_REDIS_URL", "split labels").await else {
        return;
    };
    let parts = store.features().partitions.unwrap();
    let split = parts.split("item", 4).await.unwrap();
    assert!(!split.is_empty() && split.len() <= 4, "{split:?}");
    for p in &split {
        assert!(
            p.label.contains("hash buckets") || p.label == "every key",
            "{p:?}"
        );
    }
}
