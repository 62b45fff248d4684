//! The semantics of the evolution language: the paper's examples, every
//! corner case, and property tests against a naive model of [SE] Figures 6–7.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    unreachable_pub
)]

mod build;
mod corners;
mod join;
mod naive;
mod paper;
mod props;
