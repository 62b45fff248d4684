//! Move and copy by index: the join machinery of the eager engine. A move or copy
//! builds an index of its source kind in one scan ([`index`]), within a memory
//! budget past which it spills to a scratch file ([`flat_table`]), checks its
//! targets against it (\[SE\] Proposition 2) and computes each batch's new state.
//! See docs/design.md, "Move and copy by index".

mod flat_table;
mod index;

pub use index::{JoinIndex, Resolved, StoreCheck, check_on_store};
pub(crate) use index::{
    Reading, SpillMap, Values, build, check, compute_sources, compute_targets, deliveries,
    direct_check, precheck,
};
