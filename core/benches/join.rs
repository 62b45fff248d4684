//! `copy` and `move` with a join over N users and N posts through the join
//! index, against an `add` over the same N posts (each post written once
//! either way), and the safety check alone, side by side in one run on the
//! embedded store. Prints the times, the ratios to the `add` and the peak
//! resident memory; with `--points` runs each N of the list on a fresh store
//! (time against N) and with `--plot FILE` draws that curve as a PNG.
//!
//! ```sh
//! cargo bench -p tern-core --features plot --bench join -- --entities 1000000
//! cargo bench -p tern-core --features plot --bench join -- \
//!     --points 100000,250000,500000,750000,1000000 --plot docs/join-linearity.png
//! ```
//!
//! Its global allocator is mimalloc, as the `tern` binary's (tern-cli's
//! default feature `mimalloc`); `--bench join-system` is the same benchmark
//! on the system allocator (glibc's malloc), for comparison.
//!
//! `--join-memory BYTES` sets the index's memory budget (default 64 MiB);
//! `--cache-mb N` redb's page cache (default the embedded store's, 32 MiB).
//! `--index-only N` builds and probes the index of N users alone, without a
//! store (the memory bound at 10M sources: `--index-only 10000000`).

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: fail loudly

/// As in the `tern` binary (tern-cli's default feature `mimalloc`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod join_run;

#[tokio::main]
async fn main() {
    join_run::main("mimalloc").await;
}
