//! `tern advise`: a cost-based schema advisor for column-family stores, after [NoSE] (Mior et al.).
//!
//! Given a conceptual model (entities with statistics and N:1 relationships) and a weighted workload
//! of queries and updates written against it, the advisor enumerates candidate column families,
//! plans every statement over them, and picks the cheapest set with a binary integer program solved
//! by CBC. See docs/advisor.md for the input formats and the decisions taken.

pub mod advise;
pub mod bip;
pub mod budget;
pub mod column_family;
pub mod cost;
pub mod cover;
pub mod enumerate;
pub mod error;
pub mod graph;
mod lex;
pub mod migration;
pub mod model;
pub mod planner;
pub mod query;
pub mod render;
pub mod schema;
pub mod solver;
pub mod support;
pub mod synthetic;
pub mod workload;

pub use advise::{Options, Recommendation, advise};
pub use error::{AdvisorError, Result};
pub use model::Model;
pub use workload::Workload;
