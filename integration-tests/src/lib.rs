//! Harness for tern's integration tests against real servers.
//!
//! Each backend module resolves where its server is, in this order:
//! 1. a URL from the environment (`TERN_IT_MONGODB_URL`, `TERN_IT_REDIS_URL`,
//!    `TERN_IT_CASSANDRA_URL`);
//! 2. a container started with testcontainers from the image named by
//!    `TERN_IT_<BACKEND>_IMAGE` (host networking, 127.0.0.1 only);
//! 3. otherwise the backend is skipped, with the reason reported.
//!
//! Every test gets a fresh, isolated store (its own database, key prefix or
//! keyspace), so tests run in parallel against one server.

pub mod cassandra;
pub mod common;
pub mod fault_proxy;
pub mod mongodb;
pub mod redis;
