//! Small builders for statements and states, so tests read like the language.
//!
//! The parser is written elsewhere; these construct the AST directly. Property
//! references are written `"kind.a.b"`.

use std::collections::BTreeMap;

use tern_core::lang::ast::{Atom, Join, PropRef, Span, Statement, Transfer};
use tern_core::lang::eval::{EvalOptions, State};
use tern_core::model::json::json_to_map;
use tern_core::model::{Entity, Key, Map, Value};

/// `"kind.a.b"` as a property reference.
pub fn prop(text: &str) -> PropRef {
    let mut parts = text.split('.');
    let kind = parts.next().unwrap_or_default().to_owned();
    PropRef {
        kind,
        path: parts.map(str::to_owned).collect(),
        span: Span::default(),
    }
}

/// The atom `kind.path = value`.
pub fn atom(text: &str, value: impl Into<Value>) -> Atom {
    Atom {
        prop: prop(text),
        value: value.into(),
    }
}

/// `add prop = value where conds`.
pub fn add(text: &str, value: impl Into<Value>, conditions: Vec<Atom>) -> Statement {
    Statement::Add {
        prop: prop(text),
        value: value.into(),
        conditions,
    }
}

/// `delete prop where conds`.
pub fn delete(text: &str, conditions: Vec<Atom>) -> Statement {
    Statement::Delete {
        prop: prop(text),
        conditions,
    }
}

/// `rename prop to name where conds`.
pub fn rename(text: &str, to: &str, conditions: Vec<Atom>) -> Statement {
    Statement::Rename {
        prop: prop(text),
        to: to.to_owned(),
        conditions,
    }
}

/// A transfer `prop to kind where join and conds`; each condition goes to θ1
/// or θ2 by its kind.
pub fn transfer(
    text: &str,
    to_kind: &str,
    join: Option<(&str, &str)>,
    conds: Vec<Atom>,
) -> Transfer {
    let prop = prop(text);
    let (source_conditions, target_conditions) =
        conds.into_iter().partition(|a| a.prop.kind == prop.kind);
    Transfer {
        join: join.map(|(s, t)| Join {
            source: self::prop(s),
            target: self::prop(t),
        }),
        to_kind: to_kind.to_owned(),
        prop,
        source_conditions,
        target_conditions,
    }
}

/// `move prop to kind where source = target and conds`.
pub fn mv(text: &str, to_kind: &str, join: Option<(&str, &str)>, conds: Vec<Atom>) -> Statement {
    Statement::Move(transfer(text, to_kind, join, conds))
}

/// `copy prop to kind where source = target and conds`.
pub fn copy(text: &str, to_kind: &str, join: Option<(&str, &str)>, conds: Vec<Atom>) -> Statement {
    Statement::Copy(transfer(text, to_kind, join, conds))
}

/// A key.
pub fn key(kind: &str, id: impl Into<Value>) -> Key {
    Key {
        kind: kind.to_owned(),
        id: id.into(),
    }
}

/// A map from JSON (`1` is an integer, `1.0` a float).
#[allow(clippy::unwrap_used)]
pub fn map(json: serde_json::Value) -> Map {
    json_to_map(&json).unwrap()
}

/// A value from JSON.
#[allow(clippy::unwrap_used)]
pub fn val(json: serde_json::Value) -> Value {
    tern_core::model::json::from_json(&json).unwrap()
}

/// An entity at a version.
pub fn entity(kind: &str, id: impl Into<Value>, version: u64, value: serde_json::Value) -> Entity {
    Entity {
        key: key(kind, id),
        version,
        value: map(value),
    }
}

/// A state of entities.
pub fn state(entities: impl IntoIterator<Item = Entity>) -> State {
    entities
        .into_iter()
        .map(|e| (e.key.clone(), e))
        .collect::<BTreeMap<_, _>>()
}

/// Asserts that the entity `kind:id` of `s` holds `value`.
#[track_caller]
pub fn assert_value(s: &State, kind: &str, id: impl Into<Value>, value: serde_json::Value) {
    let k = key(kind, id);
    assert_eq!(s[&k].value, map(value), "{k:?}");
}

/// The default options with `force`: an unsafe move or copy runs anyway.
pub fn with_force() -> EvalOptions {
    EvalOptions {
        force: true,
        ..EvalOptions::default()
    }
}
