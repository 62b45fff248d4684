//! Test support shared by tern's crates (feature `testing`): the engine battery
//! that every store must pass.

pub mod battery;
