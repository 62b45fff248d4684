//! The engine battery and the store contract, on every real backend.
//! One test binary; a module per backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cassandra;
mod cassandra_cluster;
mod lazy;
mod mongodb;
mod partitions;
mod redis;
mod redis_keys;
mod redis_lazy_ops;
mod redis_types;
