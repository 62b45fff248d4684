//! Test support shared by tern's crates (feature `testing`): the engine battery
//! that every store must pass, what the benchmarks of every store share, and a
//! store wrapper that intercepts chosen calls.

pub mod battery;
pub mod bench;
pub mod child;
pub mod intercept;
pub mod join_bench;
pub mod pages;
