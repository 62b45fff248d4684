//! One module per group of commands.

pub mod abandon;
pub mod advise;
pub mod analyze;
pub mod apply;
pub mod data;
pub mod generate;
pub mod info;
mod partitions_view;
pub mod project;
pub mod sweep;
