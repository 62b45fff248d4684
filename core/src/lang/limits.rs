//! Limits a statement must respect to be storable, checked when a migration
//! is loaded (so `tern check --offline` finds what `tern up` would refuse
//! halfway through a batch).
//!
//! The store keeps at most [`MAX_DEPTH`](crate::model::codec) levels of
//! arrays and maps below a property. `add k.a.b.c = v` creates maps down the
//! path: a path of `n` names nests `n - 1` maps, plus the nesting of `v`.

use super::ast::{Script, Span, Statement};
use crate::model::Value;

/// The first statement of `script` that would write a value nested deeper
/// than the store keeps: its position and a message.
pub fn too_deep(script: &Script) -> Option<(Span, String)> {
    let limit = crate::model::codec::MAX_DEPTH;
    for s in &script.statements {
        let (prop, literal) = match &s.statement {
            Statement::Add { prop, value, .. } => (prop, value_depth(value)),
            Statement::Rename { prop, .. } | Statement::Delete { prop, .. } => (prop, 0),
            Statement::Move(t) | Statement::Copy(t) => (&t.prop, 0),
            Statement::RenameKind { .. } | Statement::Build(_) => continue,
        };
        let depth = prop.path.len().saturating_sub(1) + literal;
        if depth > limit {
            return Some((
                prop.span,
                format!(
                    "this statement writes a value nested {depth} levels deep (the path and the value); the store keeps at most {limit}"
                ),
            ));
        }
    }
    None
}

/// Levels of arrays and maps in `v` (a scalar is 0), without recursion.
fn value_depth(v: &Value) -> usize {
    crate::model::json::nesting_depth([v])
}
