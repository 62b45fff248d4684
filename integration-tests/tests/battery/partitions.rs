//! The partition battery (`tern_testkit::partitions`, issue #31) on every real
//! store with the partitions facet: kills of random workers and of the
//! coordinating runner during a partitioned `tern up` with an application
//! writer, two `tern up --workers 4` at once, and a paused worker fenced off.
//! Each fresh store has its own key prefix, database or keyspace.
//!
//! MongoDB runs at [`Scale::SLOW`](tern_testkit::partitions::Scale::SLOW)
//! (2,000 entities in the kill test, longer leases): every call to the
//! MongoDB-compatible server of this machine and CI costs tens of
//! milliseconds, and 20,000 entities did not finish in 10 minutes there
//! (docs/testing.md). Cassandra runs at
//! [`Scale::LWT`](tern_testkit::partitions::Scale::LWT): the full CI size (20,000: 27 s
//! here) with leases 4 times longer (its state writes are lightweight transactions).

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
    tern_testkit::partition_tests!(
        "mongodb",
        tern_integration_tests::mongodb::backend(),
        scale = tern_testkit::partitions::Scale::SLOW
    );
}

mod cassandra {
    tern_testkit::partition_tests!(
        "cassandra",
        tern_integration_tests::cassandra::backend(),
        scale = tern_testkit::partitions::Scale::LWT
    );
}
