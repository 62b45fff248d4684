//! Applying version steps to one entity: in tern ([`apply_per_entity`]) or, where
//! every step can run there, on the store's server ([`pushdown_steps`]). The eager
//! engine's batches and the lazy client's reads both go through here.

use super::error::{MigrateError, Result};
use super::plan::{Step, StepOp};
use crate::lang::Statement;
use crate::lang::eval;
use crate::model::{Key, Map};
use crate::store::{Condition, PushOp, PushStep};

/// An atom of the language as a store condition.
pub(crate) fn atom_condition(atom: &crate::lang::Atom) -> Condition {
    Condition {
        path: atom.prop.path.clone(),
        values: vec![atom.value.clone()],
    }
}

/// Applies one per-entity step. `Ok(true)` when the data changed.
pub(crate) fn apply_per_entity(step: &Step, key: &Key, value: &mut Map) -> Result<bool> {
    match &step.op {
        StepOp::Local(stmt) => Ok(eval::apply_local(stmt, value).unwrap_or(false)),
        StepOp::Code(code) => {
            code.transform(key, value)
                .map_err(|message| MigrateError::Transform {
                    id: step.migration,
                    key: key.to_string(),
                    message,
                })
        }
        StepOp::TransferTarget { .. } | StepOp::MoveSource { .. } => Ok(false),
    }
}

/// The per-entity steps as server-side steps, when every one can run there.
pub(crate) fn pushdown_steps(steps: &[Step]) -> Option<Vec<PushStep>> {
    steps
        .iter()
        .map(|step| match &step.op {
            StepOp::Local(Statement::Add {
                prop,
                value,
                conditions,
            }) => Some(PushStep {
                conditions: conditions.iter().map(atom_condition).collect(),
                op: PushOp::Set {
                    path: prop.path.clone(),
                    value: value.clone(),
                },
            }),
            StepOp::Local(Statement::Delete { prop, conditions }) => Some(PushStep {
                conditions: conditions.iter().map(atom_condition).collect(),
                op: PushOp::Unset {
                    path: prop.path.clone(),
                },
            }),
            StepOp::Local(Statement::Rename {
                prop,
                to,
                conditions,
            }) if prop.is_top_level() => Some(PushStep {
                conditions: conditions.iter().map(atom_condition).collect(),
                op: PushOp::Rename {
                    from: prop.name().to_owned(),
                    to: to.clone(),
                },
            }),
            _ => None,
        })
        .collect()
}
