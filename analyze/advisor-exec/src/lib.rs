//! The store side of `tern advise` (crate `tern-advisor`, whose model stays free of store
//! drivers): data generated from the model's statistics, column families stored as tern entities,
//! plans executed on them (`--execute`), and the cost model calibrated on a store (`--calibrate`).
//!
//! A column family is stored as one entity per partition (kind `..._rec_N` or `..._base_N`, id
//! the partition key's values joined by `:`), its rows an array of maps sorted by the clustering
//! key. A plan is executed step by step: each get's partition key comes from the query's
//! parameters and the rows of the previous step; rows are joined on the attributes they share and
//! filtered by the query's predicates on the client.
//!
//! The kinds of one `--execute` run are a scratch namespace (`tern_advise_exec_<pid>_<ms>_...`):
//! every key written is recorded in [`Written`] and deleted at the end, also after an error or an
//! interrupt.

pub mod baseline;
pub mod calibrate;
pub mod compare;
pub mod data;
pub mod error;
pub mod execute;
pub mod layout;
pub mod update;

pub use compare::{Comparison, EXECUTE_KIND_PREFIX, compare_on, render_comparison};
pub use error::{ExecError, Result};
pub use layout::{Naming, Written};
