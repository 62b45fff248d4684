//! Redis keys and a raw cluster connection, for the Redis tests that look at the
//! server beside the store (`redis_lazy_ops`, `redis_types`).

/// A raw connection to the cluster `b` runs on (its seed node), beside the store.
pub(crate) async fn cluster_conn(
    b: &tern_integration_tests::redis::RedisBackend,
) -> redis::cluster_async::ClusterConnection {
    let seed = b.url().split('?').next().unwrap().to_owned();
    redis::cluster::ClusterClient::new(vec![seed])
        .unwrap()
        .get_async_connection()
        .await
        .unwrap()
}

/// The Redis key of entity `id` of `kind` under the namespace `ns`:
/// `ns:kind:id`, or `ns:kind:{id}` where ids are hash tags (`id_tag=1`).
pub(crate) fn redis_key(ns: &str, tagged: bool, kind: &str, id: &str) -> String {
    if tagged {
        format!("{ns}:{kind}:{{{id}}}")
    } else {
        format!("{ns}:{kind}:{id}")
    }
}
