//! The partition battery (`tern_testkit::partitions`, issue #31) on every real
//! store with the partitions facet: kills of random workers and of the
//! coordinating runner during a partitioned `tern up` with an application
//! writer, two `tern up --workers 4` at once, and a paused worker fenced off.
//! Each fresh store has its own key prefix, database or keyspace.

mod redis_server {
    tern_testkit::partition_tests!("redis", tern_integration_tests::redis::backend());
}

mod redis_cluster {
    tern_testkit::partition_tests!(
        "redis-cluster",
        tern_integration_tests::redis::cluster_backend()
    );
}

mod mongodb {
    tern_testkit::partition_tests!("mongodb", tern_integration_tests::mongodb::backend());
}

mod cassandra {
    tern_testkit::partition_tests!("cassandra", tern_integration_tests::cassandra::backend());
}
