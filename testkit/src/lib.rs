//! # tern-testkit
//!
//! Test support shared by tern's crates, kept out of the product crate
//! `tern-core` (whose public API is all it uses): the store conformance
//! battery ([`conformance`]), the engine battery that every store must pass
//! ([`battery`]), what the benchmarks of every store share ([`bench`]), a store
//! wrapper that intercepts chosen calls ([`intercept`]), a child-process
//! killer for crash tests ([`child`]), paging helpers ([`pages`]), property
//! tests of async code ([`prop`]), blocking on async code from a fault hook
//! ([`blocking`]), and for the TLS tests a test CA
//! ([`tls`]) and servers of a test's own ([`server`]).

pub mod battery;
pub mod bench;
pub mod blocking;
pub mod child;
pub mod conformance;
pub mod facets;
pub mod intercept;
pub mod join_bench;
pub mod lazy;
pub mod lazy_bench;
pub mod pages;
pub mod partitions;
pub mod prop;
pub mod server;
pub mod tls;
