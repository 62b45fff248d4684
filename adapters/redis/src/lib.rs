//! tern adapter for Redis (`redis` crate, tokio). Filled in by the Redis adapter work.
