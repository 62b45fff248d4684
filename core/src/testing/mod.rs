//! Test support shared by tern's crates (feature `testing`): the engine battery
//! that every store must pass, and what the benchmarks of every store share.

pub mod battery;
pub mod bench;
