//! The per-entity semantics of pushed-down version steps ([`Pushdown::update_in_place`](crate::store::Pushdown::update_in_place)).
//!
//! Every store that runs steps in-process (the memory and embedded stores) uses
//! these functions, so that they agree exactly; a store that runs steps inside
//! a server must agree with them too (the conformance battery checks it).
//!
//! # Semantics
//!
//! A [`PushdownRequest`] with steps `s0, s1, ...` starting at version `from`:
//! an entity at version `from + i` goes through `si`, `si+1`, ... in turn. Each
//! step applies its [`PushOp`] when all its conditions match the entity *as the
//! previous steps left it*, and counts it in `changed[i]` when the value
//! actually changed. Every entity at `from + i` ends at `from + steps.len()`
//! whether or not any op applied; entities at other versions are left alone.
//!
//! - [`PushOp::Set`] creates absent intermediate maps along the path. When an
//!   intermediate exists and is not a map, the op does not apply (nothing changes).
//!   Setting a property to the value it already has is not a change.
//! - [`PushOp::Unset`] of an absent property (or through an absent or non-map
//!   intermediate) changes nothing.
//! - [`PushOp::Rename`] of an absent property changes nothing but the version
//!   (tern's safe default, not the paper's literal semantics). Renaming onto an
//!   existing property replaces it.
//!
//! [`Pushdown::update_in_place`]: super::Pushdown::update_in_place

use super::{Error, ErrorKind, PushOp, PushStep, PushdownRequest, Result};
use crate::model::{Entity, Map, Value, Version};

/// Applies `step` to `entity` when all the step's conditions match its value.
///
/// Returns whether the value changed. The version is not touched (see [`advance`]).
pub fn apply_step(step: &PushStep, entity: &mut Entity) -> bool {
    if !step.conditions.iter().all(|c| c.matches_map(&entity.value)) {
        return false;
    }
    apply_op(&step.op, &mut entity.value)
}

/// Applies `op` to `map` unconditionally; returns whether `map` changed.
pub fn apply_op(op: &PushOp, map: &mut Map) -> bool {
    match op {
        PushOp::Set { path, value } => set_path(map, path, value),
        PushOp::Unset { path } => unset_path(map, path),
        PushOp::Rename { from, to } => {
            if from == to {
                return false;
            }
            match map.remove(from) {
                Some(v) => {
                    map.insert(to.clone(), v);
                    true
                }
                None => false,
            }
        }
    }
}

fn set_path(map: &mut Map, path: &[String], value: &Value) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    // A non-map intermediate can only be met before the first absent one, so
    // nothing has been created when the op turns out not to apply.
    let mut current = map;
    for name in parents {
        if !current.contains_key(name) {
            current.insert(name.clone(), Value::Map(Map::new()));
        }
        match current.get_mut(name) {
            Some(Value::Map(inner)) => current = inner,
            _ => return false,
        }
    }
    match current.get_mut(last) {
        Some(old) if *old == *value => false,
        Some(old) => {
            *old = value.clone();
            true
        }
        None => {
            current.insert(last.clone(), value.clone());
            true
        }
    }
}

fn unset_path(map: &mut Map, path: &[String]) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut current = map;
    for name in parents {
        match current.get_mut(name) {
            Some(Value::Map(inner)) => current = inner,
            _ => return false,
        }
    }
    current.remove(last).is_some()
}

/// The version every advanced entity ends at: `from + steps.len()`.
///
/// # Errors
/// [`ErrorKind::Unexpected`] when that overflows.
pub fn target_version(request: &PushdownRequest) -> Result<Version> {
    u64::try_from(request.steps.len())
        .ok()
        .and_then(|n| request.from.checked_add(n))
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Unexpected,
                "pushdown steps overflow the version counter",
            )
            .with_context("kind", request.kind.clone())
            .with_context("from", request.from.to_string())
        })
}

/// Runs the pending steps of `steps` (step `i` applies at version `from + i`) on
/// one entity, adding to `changed[i]` for each step that changed its value.
///
/// Returns whether the entity was at a version the steps cover (then it is now
/// at `from + steps.len()`); entities at any other version are left alone.
/// `changed` must have one counter per step.
pub fn advance(
    from: Version,
    steps: &[PushStep],
    entity: &mut Entity,
    changed: &mut [u64],
) -> bool {
    let Some(offset) = entity.version.checked_sub(from) else {
        return false;
    };
    let Ok(offset) = usize::try_from(offset) else {
        return false;
    };
    if offset >= steps.len() {
        return false;
    }
    for (i, step) in steps.iter().enumerate().skip(offset) {
        if apply_step(step, entity)
            && let Some(c) = changed.get_mut(i)
        {
            *c += 1;
        }
    }
    // Cannot overflow: callers check `target_version` first, and offset < len.
    entity.version = from.saturating_add(steps.len() as u64);
    true
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::Key;
    use crate::store::Condition;

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(str::to_owned).collect()
    }

    fn entity(version: Version, json: &str) -> Entity {
        let value = crate::model::json::json_to_map(&serde_json::from_str(json).unwrap()).unwrap();
        Entity {
            key: Key::new("k", 1).unwrap(),
            version,
            value,
        }
    }

    fn set(p: &str, v: impl Into<Value>) -> PushStep {
        PushStep {
            conditions: vec![],
            op: PushOp::Set {
                path: path(p),
                value: v.into(),
            },
        }
    }

    #[test]
    fn set_creates_intermediate_maps() {
        let mut e = entity(0, r#"{"a": 1}"#);
        assert!(apply_step(&set("x.y.z", 5), &mut e));
        assert_eq!(e, entity(0, r#"{"a": 1, "x": {"y": {"z": 5}}}"#));
    }

    #[test]
    fn set_through_a_non_map_does_not_apply() {
        let mut e = entity(0, r#"{"x": [1]}"#);
        assert!(!apply_step(&set("x.y", 5), &mut e));
        assert_eq!(e, entity(0, r#"{"x": [1]}"#));
        let mut e = entity(0, r#"{"x": {"y": 3}}"#);
        assert!(!apply_step(&set("x.y.z", 5), &mut e));
        assert_eq!(e, entity(0, r#"{"x": {"y": 3}}"#));
    }

    #[test]
    fn set_to_the_same_value_is_not_a_change() {
        let mut e = entity(0, r#"{"a": 1}"#);
        assert!(!apply_step(&set("a", 1), &mut e));
        assert!(
            apply_step(&set("a", 1.0), &mut e),
            "1.0 is a different value than 1"
        );
    }

    #[test]
    fn unset_nested_and_absent() {
        let mut e = entity(0, r#"{"a": {"b": 1, "c": 2}}"#);
        let unset = |p: &str| PushStep {
            conditions: vec![],
            op: PushOp::Unset { path: path(p) },
        };
        assert!(apply_step(&unset("a.b"), &mut e));
        assert!(!apply_step(&unset("a.b"), &mut e));
        assert!(!apply_step(&unset("a.c.d"), &mut e));
        assert!(!apply_step(&unset("z.c"), &mut e));
        assert_eq!(e, entity(0, r#"{"a": {"c": 2}}"#));
    }

    #[test]
    fn rename_of_absent_changes_nothing() {
        let rename = PushStep {
            conditions: vec![],
            op: PushOp::Rename {
                from: "a".into(),
                to: "b".into(),
            },
        };
        let mut e = entity(0, r#"{"b": 7}"#);
        assert!(!apply_step(&rename, &mut e));
        assert_eq!(e, entity(0, r#"{"b": 7}"#));
        let mut e = entity(0, r#"{"a": 1, "b": 7}"#);
        assert!(apply_step(&rename, &mut e));
        assert_eq!(e, entity(0, r#"{"b": 1}"#));
    }

    #[test]
    fn conditions_see_earlier_steps() {
        let steps = vec![
            set("flag", true),
            PushStep {
                conditions: vec![Condition::eq("flag", true)],
                op: PushOp::Set {
                    path: path("seen"),
                    value: 1.into(),
                },
            },
            PushStep {
                conditions: vec![Condition::eq("missing", 1)],
                op: PushOp::Unset { path: path("flag") },
            },
        ];
        let mut changed = vec![0; 3];
        let mut e = entity(10, "{}");
        assert!(advance(10, &steps, &mut e, &mut changed));
        assert_eq!(e, entity(13, r#"{"flag": true, "seen": 1}"#));
        assert_eq!(changed, vec![1, 1, 0]);

        // An entity already past step 0 starts at step 1.
        let mut e = entity(11, "{}");
        assert!(advance(10, &steps, &mut e, &mut changed));
        assert_eq!(e, entity(13, "{}"));
        assert_eq!(changed, vec![1, 1, 0]);

        for v in [9, 13, 14] {
            let mut e = entity(v, "{}");
            assert!(!advance(10, &steps, &mut e, &mut changed));
            assert_eq!(e.version, v);
        }
    }

    #[test]
    fn target_version_overflow_is_an_error() {
        let request = PushdownRequest {
            kind: "k".into(),
            from: u64::MAX,
            steps: vec![set("a", 1)],
            cursor: None,
            limit: 10,
        };
        assert_eq!(
            target_version(&request).unwrap_err().kind(),
            ErrorKind::Unexpected
        );
    }
}
