//! The `join` benchmark (see `benches/join.rs`) on the system allocator
//! (glibc's malloc on Linux) instead of mimalloc, for comparison:
//!
//! ```sh
//! cargo bench -p tern-core --features plot --bench join-system -- --entities 1000000
//! ```

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

#[path = "join_run/mod.rs"]
mod join_run;

#[tokio::main]
async fn main() {
    join_run::main("system (glibc malloc)").await;
}
