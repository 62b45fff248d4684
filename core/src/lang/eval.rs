//! TEMPORARY STUB (replaced by the eval branch at merge).
#![allow(missing_docs, unreachable_pub, dead_code)]
use crate::lang::{Statement, Transfer};
use crate::model::{Entity, Key, Map, Value};
pub enum TargetResolution {
    Unmatched,
    Write(Value),
    Conflict { values: Vec<(Key, Value)> },
}
pub fn apply_local(_s: &Statement, _v: &mut Map) -> Option<bool> {
    None
}
pub fn target_matches(_t: &Transfer, _e: &Entity) -> bool {
    false
}
pub fn source_matches(_t: &Transfer, _e: &Entity) -> bool {
    false
}
pub fn joins(_t: &Transfer, _s: &Entity, _e: &Entity) -> bool {
    false
}
pub fn lookup_values(_t: &Transfer, _e: &Entity) -> Vec<Value> {
    vec![]
}
pub fn resolve_target(_t: &Transfer, _e: &Entity, _s: &[&Entity]) -> TargetResolution {
    TargetResolution::Unmatched
}
