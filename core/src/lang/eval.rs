//! The reference semantics of the evolution language: pure functions, no I/O.
//!
//! Everything else in tern (the eager engine, lazy migration, `tern plan`) must
//! agree with this module. It follows \[SE\] Figures 6 and 7 (create-or-replace)
//! with tern's own decisions (docs/language.md) where the paper's literal semantics would lose
//! data silently; `docs/language.md` (part 2) has the full table.
//!
//! # Layers
//!
//! - **Atoms**: [`conditions_hold`], [`atom_holds`] (\[SE\] atoms: an absent
//!   property never matches, a multi-valued property matches when it contains
//!   the literal, numbers compare by value so `1 = 1.0`).
//! - **Per-entity operators** (add, delete, rename): [`step_local`] and
//!   [`apply_local`]. This is what a version step does to one entity, eagerly
//!   or lazily.
//! - **Move/copy building blocks**, for an engine that processes the *targets*
//!   in batches: [`target_matches`], [`source_matches`], [`joins`],
//!   [`lookup_values`] / [`source_query`] (which sources to fetch for a target),
//!   [`resolve_target_with`] (what a target becomes), and for a move's source
//!   step [`move_source_outcome`] / [`delivery_query`].
//! - **Whole-state reference**: [`apply_statement`] and [`apply_script`] over an
//!   in-memory `BTreeMap<Key, Entity>`, including version steps.
//!
//! # Decisions (see the docs for the reasons)
//!
//! - `add` creates or replaces; a nested `add` creates missing intermediate
//!   maps, and changes nothing when an intermediate is present but not a map
//!   ([`LocalEffect::Blocked`]).
//! - `delete` of an absent property changes nothing.
//! - `rename` of an absent property changes nothing (the paper would delete the
//!   target; [`EvalOptions::literal_rename`] restores that); renaming onto an
//!   existing property replaces it; renaming a property to its own name changes
//!   nothing.
//! - `move`/`copy`: every condition, join and value is read from the state
//!   *before* the statement (snapshot semantics). A target matched by several
//!   sources must receive the same value from all of them that have the
//!   property, else the statement is unsafe (\[SE\] Proposition 2). A matching
//!   source that lacks the property writes nothing (the paper would delete the
//!   target's property). A move removes the property from a source only if at
//!   least one target ends up holding the source's value; other sources keep it.
//!   [`EvalOptions::literal_transfer`] restores the paper's Figure 7.
//! - Versions: every entity of each kind in [`Statement::written_kinds`]
//!   advances by one per step, matched or not.
//! - An atom on a property named `version` is an ordinary property atom: tern's
//!   version lives outside the value ([`Entity::version`]).

use std::collections::BTreeMap;

use thiserror::Error;

use crate::lang::ast::{Atom, PropRef, Statement, Transfer};
use crate::lang::conflict::TargetConflict;
use crate::model::{Entity, Key, Map, Value};
use crate::store::{Condition, lookup};

/// Options of the reference semantics. The default is tern's safe semantics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EvalOptions {
    /// Apply an unsafe move or copy anyway: a target that sources with
    /// different values would write gets the value of the source with the
    /// **greatest key** (what the paper's loop does when it visits the sources
    /// in ascending key order: the last writer wins).
    ///
    /// ### Warning
    /// The result is one of several the paper allows, chosen by key order, not
    /// by meaning. The conflicts are listed in [`TransferReport::conflicts`].
    pub force: bool,
    /// The paper's literal `rename` (\[SE\] Figure 6): renaming an absent property
    /// removes the target property, and renaming a property to its own name
    /// deletes it.
    pub literal_rename: bool,
    /// The paper's literal `move`/`copy` (\[SE\] Figure 7): a matching source
    /// that lacks the property *removes* it from every target it joins, and a
    /// move removes the property from every matching source, whether or not a
    /// target received it.
    pub literal_transfer: bool,
}

/// Why a statement could not be applied.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvalError {
    /// A move or copy would write one target with different values from
    /// different sources, so its result would depend on the order of
    /// evaluation (\[SE\] Proposition 2). Nothing was changed.
    #[error(
        "unsafe {operator}: {count} target(s) would receive different values from different sources, \
         so the result would depend on evaluation order ([SE] Proposition 2); first: {first}. \
         Make the join select one value per target, or force it",
        count = conflicts.len(),
        first = conflicts.first().map_or_else(String::new, ToString::to_string)
    )]
    Unsafe {
        /// `move` or `copy`.
        operator: &'static str,
        /// Every conflicting target, in key order.
        conflicts: Vec<TargetConflict>,
    },
    /// A move or copy whose source and target kind are the same. The join and
    /// the conditions could not tell the two sides apart.
    #[error(
        "cannot {operator} a property of {kind} to {kind} itself: source and target kind must differ"
    )]
    SameKind {
        /// `move` or `copy`.
        operator: &'static str,
        /// The kind.
        kind: String,
    },
    /// A property reference names a kind other than the one it must be on.
    #[error("{prop} is not a property of {expected}: {role} must be on kind {expected}")]
    WrongKind {
        /// The property as written.
        prop: String,
        /// The kind it must be on.
        expected: String,
        /// What the reference is for (a condition, the join's source side, ...).
        role: &'static str,
    },
    /// An empty property path, property name or kind.
    #[error("empty name in {what}")]
    EmptyName {
        /// Where.
        what: String,
    },
    /// A kind rename onto a kind that already holds entities.
    #[error("cannot rename kind {from} to {to}: {to} already holds {count} entities")]
    KindExists {
        /// The kind renamed.
        from: String,
        /// The existing kind.
        to: String,
        /// How many entities it holds.
        count: usize,
    },
    /// A `build` whose rows give one partition and cluster position different values, so its
    /// result would depend on evaluation order. Nothing was written.
    #[error(
        "unsafe build of {kind}: {count} pair(s) of rows share their key and cluster values but differ, \
         so the result would depend on evaluation order; first: {first}. Add the ids of the kinds \
         joined 1:N to `key` or `cluster`, or force it",
        count = conflicts.len(),
        first = conflicts.first().map_or_else(String::new, ToString::to_string)
    )]
    UnsafeBuild {
        /// The new kind.
        kind: String,
        /// Every conflict.
        conflicts: Vec<crate::lang::build::BuildConflict>,
    },
    /// A `build` into a kind that already holds entities.
    #[error(
        "cannot build {kind}: it already holds {count} entities (a build fills a new kind; drop or rename the old one first)"
    )]
    BuildTargetExists {
        /// The kind.
        kind: String,
        /// How many entities it holds.
        count: usize,
    },
    /// A kind rename to a name no key can carry.
    #[error("cannot rename kind {from} to {to:?}: not a valid kind name")]
    InvalidKind {
        /// The kind renamed.
        from: String,
        /// The invalid name.
        to: String,
    },
}

/// A statement of a script that failed; the statements before it were applied.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("statement {} of the script was not applied", index + 1)]
pub struct ScriptError {
    /// 0-based index of the failed statement.
    pub index: usize,
    /// The reports of the statements applied before it.
    pub completed: Vec<StatementReport>,
    /// Why it failed.
    #[source]
    pub error: EvalError,
}

// ---------------------------------------------------------------------------
// Atoms
// ---------------------------------------------------------------------------

/// Does one \[SE\] atom `kind.path = literal` hold for an entity value?
///
/// The property is found by its path (nested maps are walked; arrays are not).
/// An absent property never matches, not even a `null` literal; a `null` value
/// matches a `null` literal. A multi-valued property (an array) matches when it
/// equals the literal or contains an element equal to it. Numbers compare by
/// value (`1 = 1.0`). The atom's kind is not checked here (see [`validate`]).
pub fn atom_holds(atom: &Atom, value: &Map) -> bool {
    lookup(value, &atom.prop.path).is_some_and(|found| found.atom_matches(&atom.value))
}

/// Does the conjunction of atoms hold for an entity value? True for no atoms.
pub fn conditions_hold(atoms: &[Atom], value: &Map) -> bool {
    atoms.iter().all(|atom| atom_holds(atom, value))
}

/// The atoms as store scan conditions, which have the same semantics
/// ([`Condition::matches_map`]), for pushing a where-clause into a scan.
pub fn conditions(atoms: &[Atom]) -> Vec<Condition> {
    atoms
        .iter()
        .map(|atom| Condition {
            path: atom.prop.path.clone(),
            values: vec![atom.value.clone()],
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

fn check_name(name: &str, what: impl FnOnce() -> String) -> Result<(), EvalError> {
    if name.is_empty() {
        Err(EvalError::EmptyName { what: what() })
    } else {
        Ok(())
    }
}

fn check_prop(prop: &PropRef, expected: &str, role: &'static str) -> Result<(), EvalError> {
    check_name(&prop.kind, || format!("the kind of {prop}"))?;
    if prop.path.is_empty() || prop.path.iter().any(String::is_empty) {
        return Err(EvalError::EmptyName {
            what: format!("the property path of {prop}"),
        });
    }
    if prop.kind != expected {
        return Err(EvalError::WrongKind {
            prop: prop.to_string(),
            expected: expected.to_owned(),
            role,
        });
    }
    Ok(())
}

fn check_atoms(atoms: &[Atom], expected: &str, role: &'static str) -> Result<(), EvalError> {
    atoms
        .iter()
        .try_for_each(|atom| check_prop(&atom.prop, expected, role))
}

/// Checks what the semantics assume of a statement: non-empty names; the
/// conditions of add, delete and rename on the kind operated on; the source
/// side of a move or copy (θ1, the join's source) on the source kind, the
/// target side (θ2, the join's target) on the target kind; and different
/// source and target kinds. The parser should already ensure all of this;
/// [`apply_statement`] checks again.
///
/// # Errors
/// The first violation found.
pub fn validate(stmt: &Statement) -> Result<(), EvalError> {
    match stmt {
        Statement::Add {
            prop, conditions, ..
        }
        | Statement::Delete { prop, conditions } => {
            check_prop(prop, &prop.kind, "the property")?;
            check_atoms(conditions, &prop.kind, "a condition")
        }
        Statement::Rename {
            prop,
            to,
            conditions,
        } => {
            check_prop(prop, &prop.kind, "the property")?;
            check_name(to, || format!("the new name of {prop}"))?;
            check_atoms(conditions, &prop.kind, "a condition")
        }
        Statement::Move(t) | Statement::Copy(t) => {
            let source = t.prop.kind.as_str();
            check_prop(&t.prop, source, "the property")?;
            check_name(&t.to_kind, || format!("the target kind of {}", t.prop))?;
            if t.to_kind == source {
                return Err(EvalError::SameKind {
                    operator: stmt.operator(),
                    kind: t.to_kind.clone(),
                });
            }
            if let Some(join) = &t.join {
                check_prop(&join.source, source, "the join's source side")?;
                check_prop(&join.target, &t.to_kind, "the join's target side")?;
            }
            check_atoms(&t.source_conditions, source, "a source condition")?;
            check_atoms(&t.target_conditions, &t.to_kind, "a target condition")
        }
        Statement::RenameKind { from, to } => {
            check_name(from, || "the kind renamed".to_owned())?;
            check_name(to, || format!("the new name of kind {from}"))
        }
        Statement::Build(b) => {
            check_name(&b.kind, || "the kind built".to_owned())?;
            let sources = b.sources();
            for j in &b.joins {
                check_prop(&j.new, &j.kind, "the joined kind's side")?;
            }
            for p in b.columns().chain(b.joins.iter().map(|j| &j.known)) {
                if !sources.contains(&p.kind.as_str()) {
                    return Err(EvalError::WrongKind {
                        prop: p.to_string(),
                        expected: sources.join(" or "),
                        role: "a property of a build",
                    });
                }
                check_prop(p, &p.kind, "a property of a build")?;
            }
            if b.key.is_empty() {
                return Err(EvalError::EmptyName {
                    what: format!("the key of the build of {}", b.kind),
                });
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------

/// What setting a value at a path did.
enum SetOutcome {
    Changed,
    Unchanged,
    Blocked,
}

/// Sets `path` to `value`, creating missing intermediate maps. Changes nothing
/// (and says `Blocked`) when an intermediate is present but not a map.
fn set_path(map: &mut Map, path: &[String], value: &Value) -> SetOutcome {
    let Some((last, parents)) = path.split_last() else {
        return SetOutcome::Blocked;
    };
    // A blocked step is always a present one, and every step below a created
    // map is created too, so a blocked path never leaves a created map behind.
    let mut current = map;
    for name in parents {
        current = match current
            .entry(name.clone())
            .or_insert_with(|| Value::Map(Map::new()))
        {
            Value::Map(inner) => inner,
            _ => return SetOutcome::Blocked,
        };
    }
    match current.insert(last.clone(), value.clone()) {
        Some(old) if old == *value => SetOutcome::Unchanged,
        _ => SetOutcome::Changed,
    }
}

/// The map holding the last step of `path`, if every step before it is a map.
fn parent_mut<'a>(map: &'a mut Map, parents: &[String]) -> Option<&'a mut Map> {
    let mut current = map;
    for name in parents {
        current = match current.get_mut(name)? {
            Value::Map(inner) => inner,
            _ => return None,
        };
    }
    Some(current)
}

/// Removes the property at `path`; returns it if it was there. Parents left
/// empty are kept.
fn remove_path(map: &mut Map, path: &[String]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    parent_mut(map, parents)?.remove(last)
}

// ---------------------------------------------------------------------------
// Per-entity operators
// ---------------------------------------------------------------------------

/// What a per-entity operator did to one entity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalEffect {
    /// The where-clause does not hold: the data is untouched.
    NotMatched,
    /// Matched, but the data is the same afterwards (e.g. deleting an absent
    /// property, adding the value already there).
    Unchanged,
    /// Matched and the data changed.
    Changed,
    /// Matched, but a nested `add` could not create its path because an
    /// intermediate property is present and not a map (e.g. `add
    /// post.author.name = "x"` where `author` is a string). Nothing changed.
    Blocked,
}

impl LocalEffect {
    /// Did the where-clause hold?
    pub fn is_matched(self) -> bool {
        !matches!(self, LocalEffect::NotMatched)
    }

    /// Did the data change?
    pub fn is_changed(self) -> bool {
        matches!(self, LocalEffect::Changed)
    }
}

impl From<SetOutcome> for LocalEffect {
    fn from(outcome: SetOutcome) -> Self {
        match outcome {
            SetOutcome::Changed => LocalEffect::Changed,
            SetOutcome::Unchanged => LocalEffect::Unchanged,
            SetOutcome::Blocked => LocalEffect::Blocked,
        }
    }
}

fn changed_if(changed: bool) -> LocalEffect {
    if changed {
        LocalEffect::Changed
    } else {
        LocalEffect::Unchanged
    }
}

/// One per-entity step of add, delete or rename (\[SE\] Figure 6 with tern's
/// decisions): checks the where-clause on `value`, then changes it.
///
/// Returns `None` for move, copy and kind renames, which are not per-entity.
/// The entity's version is not part of `value`; the caller advances it for
/// every entity of the kind, whatever the effect.
///
/// - `add k.p = v`: creates or replaces `p`. A nested path creates missing
///   intermediate maps; if an intermediate is present and not a map, nothing
///   changes ([`LocalEffect::Blocked`]).
/// - `delete k.p`: removes `p`; absent (or under a non-map) changes nothing.
///   Removing the last property of a nested map leaves the empty map.
/// - `rename k.p to q`: within `p`'s parent map, `q` gets `p`'s value
///   (replacing any `q`) and `p` is removed. An absent `p` changes nothing,
///   `q == p` changes nothing. With [`EvalOptions::literal_rename`] an absent
///   `p` removes `q`, and `q == p` removes `p` (\[SE\] Figure 6 read literally).
pub fn step_local(stmt: &Statement, value: &mut Map, opts: &EvalOptions) -> Option<LocalEffect> {
    let conditions = match stmt {
        Statement::Add { conditions, .. }
        | Statement::Delete { conditions, .. }
        | Statement::Rename { conditions, .. } => conditions,
        Statement::Move(_)
        | Statement::Copy(_)
        | Statement::RenameKind { .. }
        | Statement::Build(_) => return None,
    };
    if !conditions_hold(conditions, value) {
        return Some(LocalEffect::NotMatched);
    }
    let effect = match stmt {
        Statement::Add {
            prop,
            value: literal,
            ..
        } => set_path(value, &prop.path, literal).into(),
        Statement::Delete { prop, .. } => changed_if(remove_path(value, &prop.path).is_some()),
        Statement::Rename { prop, to, .. } => {
            rename_local(value, &prop.path, to, opts.literal_rename)
        }
        Statement::Move(_)
        | Statement::Copy(_)
        | Statement::RenameKind { .. }
        | Statement::Build(_) => return None,
    };
    Some(effect)
}

fn rename_local(value: &mut Map, path: &[String], to: &str, literal: bool) -> LocalEffect {
    let Some((last, parents)) = path.split_last() else {
        return LocalEffect::Unchanged;
    };
    let Some(parent) = parent_mut(value, parents) else {
        return LocalEffect::Unchanged;
    };
    if last == to {
        // setProperty(e, n, getProperty(e, n)); removeProperty(e, n) deletes n.
        return changed_if(literal && parent.remove(last).is_some());
    }
    match parent.remove(last) {
        Some(moved) => {
            parent.insert(to.to_owned(), moved);
            LocalEffect::Changed
        }
        // setProperty(e, m, ⊥) removes m.
        None => changed_if(literal && parent.remove(to).is_some()),
    }
}

/// [`step_local`] with the default options, reduced to "did the data change?".
///
/// `Some(changed)` for add, delete and rename (`false` also when the
/// where-clause does not hold); `None` for move, copy and kind renames.
pub fn apply_local(stmt: &Statement, value: &mut Map) -> Option<bool> {
    step_local(stmt, value, &EvalOptions::default()).map(LocalEffect::is_changed)
}

// ---------------------------------------------------------------------------
// Move and copy: building blocks
// ---------------------------------------------------------------------------

/// θ1: is `source` of the source kind, and do the source conditions hold?
pub fn source_matches(t: &Transfer, source: &Entity) -> bool {
    source.key.kind == t.prop.kind && conditions_hold(&t.source_conditions, &source.value)
}

/// θ2 without the join: is `target` of the target kind, and do the target's
/// constant conditions hold?
pub fn target_matches(t: &Transfer, target: &Entity) -> bool {
    target.key.kind == t.to_kind && conditions_hold(&t.target_conditions, &target.value)
}

/// The join atom `c1.a = c2.b`, evaluated as \[SE\] does for a loop over the
/// sources: `target.b` atom-matches the literal `source.a`. So the target's
/// `b` must equal `source.a` or, when `b` is an array, contain it; numbers
/// compare by value. If either side is absent, no join. A source `a` that is an
/// array joins only a `b` equal to the whole array (or an array containing it
/// as an element), as in MongoDB. `null` joins `null`. Without a join atom,
/// every source joins every target (cross product).
pub fn joins(t: &Transfer, source: &Entity, target: &Entity) -> bool {
    let Some(join) = &t.join else {
        return true;
    };
    match (
        lookup(&source.value, &join.source.path),
        lookup(&target.value, &join.target.path),
    ) {
        (Some(a), Some(b)) => b.atom_matches(a),
        _ => false,
    }
}

/// The values of the source's join property `a` that could join `target`:
/// `target.b` itself and, when it is an array, its elements (sorted, without
/// duplicates). `None` when there is no join (every source joins); empty when
/// the target lacks `b` (no source joins).
///
/// Sources whose `a` atom-matches one of these values (a store scan with
/// [`source_query`]) are a superset of the joining sources; confirm each with
/// [`joins`] (or let [`resolve_target_with`] do it).
pub fn lookup_values(t: &Transfer, target: &Entity) -> Option<Vec<Value>> {
    let join = t.join.as_ref()?;
    let mut values = Vec::new();
    if let Some(b) = lookup(&target.value, &join.target.path) {
        if let Value::Array(items) = b {
            values.extend(items.iter().cloned());
        }
        values.push(b.clone());
    }
    values.sort();
    values.dedup();
    Some(values)
}

/// Scan conditions on the source kind that find every source that can write
/// `target` (θ1 and the join, a superset: confirm with [`joins`]). `None` when
/// no source can join the target (it lacks the join property).
pub fn source_query(t: &Transfer, target: &Entity) -> Option<Vec<Condition>> {
    let mut query = conditions(&t.source_conditions);
    if let (Some(join), Some(values)) = (&t.join, lookup_values(t, target)) {
        if values.is_empty() {
            return None;
        }
        query.push(Condition {
            path: join.source.path.clone(),
            values,
        });
    }
    Some(query)
}

/// Scan conditions on the target kind: θ2's constant atoms.
pub fn target_query(t: &Transfer) -> Vec<Condition> {
    conditions(&t.target_conditions)
}

/// Scan conditions on the target kind that find exactly the targets `source`
/// joins (θ2 and `b` atom-matching `source.a`), for a move's source step.
/// `None` when the source joins nothing (it lacks the join property).
pub fn delivery_query(t: &Transfer, source: &Entity) -> Option<Vec<Condition>> {
    let mut query = target_query(t);
    if let Some(join) = &t.join {
        let a = lookup(&source.value, &join.source.path)?;
        query.push(Condition {
            path: join.target.path.clone(),
            values: vec![a.clone()],
        });
    }
    Some(query)
}

/// The value a source would write: its moved/copied property, if present.
pub fn transfer_value<'a>(t: &Transfer, source: &'a Entity) -> Option<&'a Value> {
    lookup(&source.value, &t.prop.path)
}

/// What a move or copy does to one target, given the sources that join it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetResolution {
    /// θ2 does not hold, or no matching source joins the target: unchanged.
    Unmatched,
    /// Matching sources join the target but none has the property: unchanged
    /// (tern's default; with [`EvalOptions::literal_transfer`] this is
    /// [`TargetResolution::Remove`]).
    Lacking {
        /// The matching sources, in key order.
        sources: Vec<Key>,
    },
    /// Set the property to `value`: every matching source that has the property
    /// has this value.
    Set {
        /// The value.
        value: Value,
        /// The sources that deliver it, in key order.
        sources: Vec<Key>,
    },
    /// Remove the property ([`EvalOptions::literal_transfer`] only: every
    /// matching source lacks it).
    Remove {
        /// The matching sources, in key order.
        sources: Vec<Key>,
    },
    /// [`TargetResolution::forced`] only, with [`EvalOptions::literal_transfer`]:
    /// the winning source lacks the property but an earlier one had it. The
    /// paper's loop sets the property (creating the maps on its path) and then
    /// removes it: the property goes, maps it created stay.
    RemoveAfterSet {
        /// The value an earlier source set.
        earlier: Value,
        /// The sources that remove it (they lack it), in key order.
        sources: Vec<Key>,
    },
    /// Sources with different values (absence counts as a value with
    /// [`EvalOptions::literal_transfer`]): unsafe. Not applied; see
    /// [`TargetResolution::forced`].
    Conflict {
        /// Each writing source and its value (`None`: it lacks the property),
        /// in key order.
        writes: Vec<(Key, Option<Value>)>,
    },
}

impl TargetResolution {
    /// Did at least one matching source join the target?
    pub fn is_matched(&self) -> bool {
        !matches!(self, TargetResolution::Unmatched)
    }

    /// Resolves a conflict as [`EvalOptions::force`] documents: the source with
    /// the greatest key wins, with exactly the effect of the paper's loop in
    /// ascending key order (the last writer wins; maps an earlier writer created
    /// on the property's path stay). Every other resolution is returned as is.
    pub fn forced(self) -> TargetResolution {
        let TargetResolution::Conflict { writes } = self else {
            return self;
        };
        let Some((_, winner)) = writes.last().cloned() else {
            return TargetResolution::Unmatched;
        };
        let earlier = writes.iter().find_map(|(_, v)| v.clone());
        let sources = writes
            .into_iter()
            .filter(|(_, v)| *v == winner)
            .map(|(k, _)| k)
            .collect();
        match (winner, earlier) {
            (Some(value), _) => TargetResolution::Set { value, sources },
            (None, Some(earlier)) => TargetResolution::RemoveAfterSet { earlier, sources },
            (None, None) => TargetResolution::Remove { sources },
        }
    }

    /// Applies the resolution to the target's value. `None` for a
    /// [`TargetResolution::Conflict`], which is never applied.
    pub fn apply(&self, t: &Transfer, target: &mut Map) -> Option<LocalEffect> {
        Some(match self {
            TargetResolution::Unmatched => LocalEffect::NotMatched,
            TargetResolution::Lacking { .. } => LocalEffect::Unchanged,
            TargetResolution::Set { value, .. } => set_path(target, &t.prop.path, value).into(),
            TargetResolution::Remove { .. } => {
                changed_if(remove_path(target, &t.prop.path).is_some())
            }
            TargetResolution::RemoveAfterSet { earlier, .. } => {
                let before = target.clone();
                set_path(target, &t.prop.path, earlier);
                remove_path(target, &t.prop.path);
                changed_if(*target != before)
            }
            TargetResolution::Conflict { .. } => return None,
        })
    }
}

/// [`resolve_target_with`] with the default options.
pub fn resolve_target(t: &Transfer, target: &Entity, sources: &[&Entity]) -> TargetResolution {
    resolve_target_with(t, target, sources, &EvalOptions::default())
}

/// What `target` becomes under a move or copy, given candidate `sources`.
///
/// `sources` may be any superset of the joining sources (e.g. the result of a
/// [`source_query`] scan, or every entity of the source kind): each is checked
/// with [`source_matches`] and [`joins`], and duplicates are ignored. All
/// conditions are read from the entities as given, which must be their state
/// before the statement. [`EvalOptions::force`] is not applied here: call
/// [`TargetResolution::forced`].
pub fn resolve_target_with(
    t: &Transfer,
    target: &Entity,
    sources: &[&Entity],
    opts: &EvalOptions,
) -> TargetResolution {
    if !target_matches(t, target) {
        return TargetResolution::Unmatched;
    }
    let mut writes: Vec<(Key, Option<Value>)> = sources
        .iter()
        .filter(|source| source_matches(t, source) && joins(t, source, target))
        .map(|source| (source.key.clone(), transfer_value(t, source).cloned()))
        .collect();
    writes.sort_by(|x, y| x.0.cmp(&y.0));
    writes.dedup_by(|x, y| x.0 == y.0);
    if writes.is_empty() {
        return TargetResolution::Unmatched;
    }
    if !opts.literal_transfer {
        if writes.iter().all(|(_, v)| v.is_none()) {
            return TargetResolution::Lacking {
                sources: writes.into_iter().map(|(k, _)| k).collect(),
            };
        }
        writes.retain(|(_, v)| v.is_some());
    }
    let Some((_, first)) = writes.first().cloned() else {
        return TargetResolution::Unmatched;
    };
    if writes.iter().any(|(_, v)| *v != first) {
        return TargetResolution::Conflict { writes };
    }
    let sources = writes.into_iter().map(|(k, _)| k).collect();
    match first {
        Some(value) => TargetResolution::Set { value, sources },
        None => TargetResolution::Remove { sources },
    }
}

/// What a move does to one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SourceOutcome {
    /// Not of the source kind, or θ1 does not hold: untouched.
    Unmatched,
    /// θ1 holds but the source lacks the property: nothing to move.
    Lacking,
    /// θ1 holds and the source has the property, but no target holds its
    /// value after the move (no target joined it, or under
    /// [`EvalOptions::force`] other sources won every target it joined): it
    /// keeps the property and is counted.
    Kept,
    /// At least one target holds the source's value: the property is removed
    /// from the source.
    Delivered,
}

impl SourceOutcome {
    /// Applies the outcome to the source's value: removes the property when
    /// [`SourceOutcome::Delivered`]. Returns whether the value changed.
    pub fn apply(self, t: &Transfer, source: &mut Map) -> bool {
        self == SourceOutcome::Delivered && remove_path(source, &t.prop.path).is_some()
    }
}

/// The source side of a move: does `source` lose the property?
///
/// `targets_after` are target entities **after the move's target step** (a
/// superset of the joined ones is fine, e.g. a [`delivery_query`] scan). A
/// source is delivered when θ1 holds, it has the property, and some target it
/// joins (θ2 and the join) now holds a value structurally equal to the
/// source's. With [`EvalOptions::literal_transfer`] every matching source with
/// the property is delivered, targets or not.
///
/// # Precondition
/// θ2 and the join are evaluated on `targets_after`, while the semantics
/// evaluate them before the statement. They agree unless a target condition
/// or the join's target side reads the moved property itself
/// ([`crate::lang::safety::StaticWarning::ReadsTransferredProperty`]). For
/// such a statement record the deliveries while resolving the targets
/// instead: a source is delivered when it is among the `sources` of a
/// [`TargetResolution::Set`] (after [`TargetResolution::forced`]) whose
/// [`TargetResolution::apply`] was not [`LocalEffect::Blocked`].
pub fn move_source_outcome(
    t: &Transfer,
    source: &Entity,
    targets_after: &[&Entity],
    opts: &EvalOptions,
) -> SourceOutcome {
    if !source_matches(t, source) {
        return SourceOutcome::Unmatched;
    }
    let Some(value) = transfer_value(t, source) else {
        return SourceOutcome::Lacking;
    };
    let delivered = opts.literal_transfer
        || targets_after.iter().any(|target| {
            target_matches(t, target)
                && joins(t, source, target)
                && lookup(&target.value, &t.prop.path) == Some(value)
        });
    if delivered {
        SourceOutcome::Delivered
    } else {
        SourceOutcome::Kept
    }
}

/// [`move_source_outcome`] with the default options, as a yes/no.
pub fn source_delivered(t: &Transfer, source: &Entity, targets_after: &[&Entity]) -> bool {
    move_source_outcome(t, source, targets_after, &EvalOptions::default())
        == SourceOutcome::Delivered
}

// ---------------------------------------------------------------------------
// Whole-state reference
// ---------------------------------------------------------------------------

/// The in-memory store state the reference works on.
pub type State = BTreeMap<Key, Entity>;

/// What one version step did to one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KindStep {
    /// The kind.
    pub kind: String,
    /// Entities of the kind whose version advanced (all of them).
    pub entities: u64,
    /// Entities the statement matched (where-clause; for a move/copy target,
    /// θ2 and at least one joining source; for a move source, θ1).
    pub matched: u64,
    /// Entities whose data changed.
    pub changed: u64,
    /// Matched entities a nested path could not be created in
    /// ([`LocalEffect::Blocked`]).
    pub blocked: u64,
}

/// Move/copy details.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferReport {
    /// Sources for which θ1 holds.
    pub sources_matched: u64,
    /// Matching sources that lack the property (they write nothing).
    pub sources_lacking: u64,
    /// Move: sources that lost the property (a target holds their value).
    pub sources_delivered: u64,
    /// Move: matching sources with the property that no target received;
    /// they keep it.
    pub sources_kept: u64,
    /// Targets that some matching source joins.
    pub targets_matched: u64,
    /// Matched targets left as they were because no joining source had the
    /// property (tern's default; the paper would remove it).
    pub targets_lacking: u64,
    /// Conflicts resolved by [`EvalOptions::force`] (empty otherwise: an
    /// unsafe statement is an error).
    pub conflicts: Vec<TargetConflict>,
}

/// What one statement did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatementReport {
    /// One entry per version step, in [`Statement::written_kinds`] order.
    pub steps: Vec<KindStep>,
    /// For move and copy.
    pub transfer: Option<TransferReport>,
    /// For a kind rename: the entities re-keyed.
    pub renamed: u64,
}

impl StatementReport {
    /// The step of `kind`, if the statement wrote it.
    pub fn step(&self, kind: &str) -> Option<&KindStep> {
        self.steps.iter().find(|s| s.kind == kind)
    }
}

fn keys_of_kind(state: &State, kind: &str) -> Vec<Key> {
    state.keys().filter(|k| k.kind == kind).cloned().collect()
}

/// Advances every entity of `kind` by one version step.
fn bump_kind(state: &mut State, kind: &str) -> u64 {
    let mut n = 0;
    for entity in state.values_mut().filter(|e| e.key.kind == kind) {
        entity.version = entity.version.saturating_add(1);
        n += 1;
    }
    n
}

/// Applies one statement to an in-memory store state: the reference every
/// engine run must reproduce.
///
/// Every entity of each kind in [`Statement::written_kinds`] advances its
/// version by one (a move: both kinds; a copy: the target kind); its data
/// changes only where the statement matches. On error the state is unchanged.
///
/// # Examples
/// \[SE\] Example 2, `add blogpost.likes = 0`:
/// ```
/// use std::collections::BTreeMap;
/// use tern_core::lang::eval::{EvalOptions, apply_statement};
/// use tern_core::lang::{PropRef, Span, Statement};
/// use tern_core::model::{Entity, Key, Map};
///
/// let likes = PropRef { kind: "blogpost".into(), path: vec!["likes".into()], span: Span::default() };
/// let stmt = Statement::Add { prop: likes, value: 0.into(), conditions: vec![] };
/// let key = Key::new("blogpost", 331175)?;
/// let value = Map::from([("title".to_owned(), "NoSQL Data".into())]);
/// let mut state = BTreeMap::from([(key.clone(), Entity { key: key.clone(), version: 1, value })]);
///
/// let report = apply_statement(&stmt, &mut state, &EvalOptions::default())?;
/// assert_eq!(state[&key].get("likes"), Some(&0.into()));
/// assert_eq!(state[&key].version, 2);
/// assert_eq!(report.steps[0].changed, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// - [`EvalError::Unsafe`]: a move or copy would write a target with different
///   values from different sources, unless [`EvalOptions::force`];
/// - [`EvalError::KindExists`] / [`EvalError::InvalidKind`]: a kind rename onto
///   a kind in use, or to an invalid name;
/// - the errors of [`validate`].
pub fn apply_statement(
    stmt: &Statement,
    state: &mut State,
    opts: &EvalOptions,
) -> Result<StatementReport, EvalError> {
    validate(stmt)?;
    match stmt {
        Statement::Add { prop, .. }
        | Statement::Delete { prop, .. }
        | Statement::Rename { prop, .. } => {
            Ok(apply_local_statement(stmt, &prop.kind, state, opts))
        }
        Statement::Move(t) => apply_transfer(stmt.operator(), t, true, state, opts),
        Statement::Copy(t) => apply_transfer(stmt.operator(), t, false, state, opts),
        Statement::RenameKind { from, to } => rename_kind(from, to, state),
        Statement::Build(b) => apply_build(b, state, opts),
    }
}

/// A `build`: the new kind's entities (version 0: the kind has had no step) from the state
/// before it ([`crate::lang::build`]). Refused when the kind holds entities, or when unsafe and
/// not forced (forced: the first of two conflicting rows is kept).
fn apply_build(
    b: &crate::lang::Build,
    state: &mut State,
    opts: &EvalOptions,
) -> Result<StatementReport, EvalError> {
    let existing = state.keys().filter(|k| k.kind == b.kind).count();
    if existing > 0 {
        return Err(EvalError::BuildTargetExists {
            kind: b.kind.clone(),
            count: existing,
        });
    }
    let built = crate::lang::build::build_rows(b, |kind| {
        state
            .values()
            .filter(|e| e.key.kind == kind)
            .map(|e| &e.value)
            .collect()
    });
    if !built.conflicts.is_empty() && !opts.force {
        return Err(EvalError::UnsafeBuild {
            kind: b.kind.clone(),
            conflicts: built.conflicts,
        });
    }
    let mut entities = Vec::with_capacity(built.entities.len());
    for (id, value) in built.entities {
        let key = Key::new(b.kind.as_str(), id).map_err(|_| EvalError::InvalidKind {
            from: b.from.clone(),
            to: b.kind.clone(),
        })?;
        entities.push(Entity {
            key,
            version: 0,
            value,
        });
    }
    for e in entities {
        state.insert(e.key.clone(), e);
    }
    Ok(StatementReport::default())
}

fn apply_local_statement(
    stmt: &Statement,
    kind: &str,
    state: &mut State,
    opts: &EvalOptions,
) -> StatementReport {
    let mut step = KindStep {
        kind: kind.to_owned(),
        ..KindStep::default()
    };
    for entity in state.values_mut().filter(|e| e.key.kind == kind) {
        let effect = step_local(stmt, &mut entity.value, opts).unwrap_or(LocalEffect::NotMatched);
        step.matched += u64::from(effect.is_matched());
        step.changed += u64::from(effect.is_changed());
        step.blocked += u64::from(effect == LocalEffect::Blocked);
        entity.version = entity.version.saturating_add(1);
        step.entities += 1;
    }
    StatementReport {
        steps: vec![step],
        transfer: None,
        renamed: 0,
    }
}

/// What a move/copy decides on the state before it: each target's resolution
/// (by index into the target keys), the conflicting targets, and for each source
/// the targets it joins.
struct TransferDecision {
    resolutions: Vec<(usize, TargetResolution)>,
    conflicts: Vec<TargetConflict>,
    sources_of: BTreeMap<Key, Vec<usize>>,
}

fn apply_transfer(
    operator: &'static str,
    t: &Transfer,
    is_move: bool,
    state: &mut State,
    opts: &EvalOptions,
) -> Result<StatementReport, EvalError> {
    let source_keys = keys_of_kind(state, &t.prop.kind);
    let target_keys = keys_of_kind(state, &t.to_kind);
    // Everything is decided on the state before the statement.
    let TransferDecision {
        resolutions,
        conflicts,
        sources_of,
    } = decide_transfer(t, state, &source_keys, &target_keys, opts);
    if !conflicts.is_empty() && !opts.force {
        return Err(EvalError::Unsafe {
            operator,
            conflicts,
        });
    }
    let mut report = TransferReport {
        conflicts,
        ..TransferReport::default()
    };
    let target_step = apply_targets(t, state, &target_keys, resolutions, &mut report);
    let source_step = apply_sources(
        t,
        is_move,
        state,
        (&source_keys, &target_keys),
        &sources_of,
        opts,
        &mut report,
    );
    // Step order as in `Statement::written_kinds`: the target kind, then (move) the source kind.
    let mut steps = vec![target_step];
    if is_move {
        steps.push(source_step);
    }
    for step in &mut steps {
        step.entities = bump_kind(state, &step.kind);
    }
    Ok(StatementReport {
        steps,
        transfer: Some(report),
        renamed: 0,
    })
}

/// Resolves every target of a move/copy against the sources (see [`TransferDecision`]).
fn decide_transfer(
    t: &Transfer,
    state: &State,
    source_keys: &[Key],
    target_keys: &[Key],
    opts: &EvalOptions,
) -> TransferDecision {
    let sources: Vec<&Entity> = source_keys.iter().filter_map(|k| state.get(k)).collect();
    let mut resolutions = Vec::with_capacity(target_keys.len());
    let mut conflicts = Vec::new();
    // For each source, the targets it joins (indexes into target_keys).
    let mut sources_of: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (index, key) in target_keys.iter().enumerate() {
        let Some(target) = state.get(key) else {
            continue;
        };
        let resolution = resolve_target_with(t, target, &sources, opts);
        if resolution.is_matched() {
            for source in sources
                .iter()
                .filter(|s| source_matches(t, s) && joins(t, s, target))
            {
                sources_of
                    .entry(source.key.clone())
                    .or_default()
                    .push(index);
            }
        }
        if let TargetResolution::Conflict { writes } = &resolution {
            conflicts.push(TargetConflict {
                target: key.clone(),
                writes: writes.clone(),
            });
        }
        resolutions.push((index, resolution));
    }
    TransferDecision {
        resolutions,
        conflicts,
        sources_of,
    }
}

/// Applies each target's (forced) resolution; returns the target kind's step.
fn apply_targets(
    t: &Transfer,
    state: &mut State,
    target_keys: &[Key],
    resolutions: Vec<(usize, TargetResolution)>,
    report: &mut TransferReport,
) -> KindStep {
    let mut target_step = KindStep {
        kind: t.to_kind.clone(),
        ..KindStep::default()
    };
    for (index, resolution) in resolutions {
        let resolution = resolution.forced();
        let Some(target) = state.get_mut(&target_keys[index]) else {
            continue;
        };
        let effect = resolution
            .apply(t, &mut target.value)
            .unwrap_or(LocalEffect::Unchanged);
        target_step.matched += u64::from(effect.is_matched());
        target_step.changed += u64::from(effect.is_changed());
        target_step.blocked += u64::from(effect == LocalEffect::Blocked);
        report.targets_lacking += u64::from(matches!(resolution, TargetResolution::Lacking { .. }));
    }
    report.targets_matched = target_step.matched;
    target_step
}

/// What became of each source (and, for a move, removes the delivered values);
/// returns the source kind's step. `keys` are the source and target keys.
fn apply_sources(
    t: &Transfer,
    is_move: bool,
    state: &mut State,
    keys: (&[Key], &[Key]),
    sources_of: &BTreeMap<Key, Vec<usize>>,
    opts: &EvalOptions,
    report: &mut TransferReport,
) -> KindStep {
    let (source_keys, target_keys) = keys;
    let mut source_step = KindStep {
        kind: t.prop.kind.clone(),
        ..KindStep::default()
    };
    for key in source_keys {
        let Some(source) = state.get(key) else {
            continue;
        };
        let outcome = if !source_matches(t, source) {
            SourceOutcome::Unmatched
        } else if let Some(value) = transfer_value(t, source) {
            // Delivered: a target it joined (before the statement) now holds its value.
            let joined = sources_of.get(key).map_or(&[][..], Vec::as_slice);
            let delivered = opts.literal_transfer
                || joined.iter().any(|&i| {
                    state
                        .get(&target_keys[i])
                        .and_then(|f| lookup(&f.value, &t.prop.path))
                        == Some(value)
                });
            if delivered {
                SourceOutcome::Delivered
            } else {
                SourceOutcome::Kept
            }
        } else {
            SourceOutcome::Lacking
        };
        report.sources_matched += u64::from(outcome != SourceOutcome::Unmatched);
        report.sources_lacking += u64::from(outcome == SourceOutcome::Lacking);
        if is_move {
            report.sources_delivered += u64::from(outcome == SourceOutcome::Delivered);
            report.sources_kept += u64::from(outcome == SourceOutcome::Kept);
            if let Some(source) = state.get_mut(key) {
                source_step.changed += u64::from(outcome.apply(t, &mut source.value));
            }
        }
    }
    source_step.matched = report.sources_matched;
    source_step
}

fn rename_kind(from: &str, to: &str, state: &mut State) -> Result<StatementReport, EvalError> {
    if from == to {
        return Ok(StatementReport::default());
    }
    let existing = state.keys().filter(|k| k.kind == to).count();
    if existing > 0 {
        return Err(EvalError::KindExists {
            from: from.to_owned(),
            to: to.to_owned(),
            count: existing,
        });
    }
    let keys = keys_of_kind(state, from);
    let mut renamed = Vec::with_capacity(keys.len());
    for key in &keys {
        let new_key = Key::new(to, key.id.clone()).map_err(|_| EvalError::InvalidKind {
            from: from.to_owned(),
            to: to.to_owned(),
        })?;
        renamed.push(new_key);
    }
    for (old, new_key) in keys.iter().zip(renamed) {
        if let Some(mut entity) = state.remove(old) {
            entity.key = new_key.clone();
            state.insert(new_key, entity);
        }
    }
    Ok(StatementReport {
        steps: Vec::new(),
        transfer: None,
        renamed: keys.len() as u64,
    })
}

/// Applies statements in order ([`apply_statement`] each).
///
/// # Errors
/// The first statement that fails, with the reports of those applied before
/// it; the state then holds their effect (and none of the failed one's).
pub fn apply_script<'a, I>(
    statements: I,
    state: &mut State,
    opts: &EvalOptions,
) -> Result<Vec<StatementReport>, ScriptError>
where
    I: IntoIterator<Item = &'a Statement>,
{
    let mut completed = Vec::new();
    for (index, stmt) in statements.into_iter().enumerate() {
        match apply_statement(stmt, state, opts) {
            Ok(report) => completed.push(report),
            Err(error) => {
                return Err(ScriptError {
                    index,
                    completed,
                    error,
                });
            }
        }
    }
    Ok(completed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<EvalOptions>();
        check::<EvalError>();
        check::<ScriptError>();
        check::<StatementReport>();
        check::<TargetResolution>();
    }

    #[test]
    fn set_path_outcomes() {
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let mut m = Map::new();
        assert!(matches!(
            set_path(&mut m, &path(&["a", "b"]), &Value::Int(1)),
            SetOutcome::Changed
        ));
        assert!(matches!(
            set_path(&mut m, &path(&["a", "b"]), &Value::Int(1)),
            SetOutcome::Unchanged
        ));
        assert!(matches!(
            set_path(&mut m, &path(&["a", "b", "c"]), &Value::Int(1)),
            SetOutcome::Blocked
        ));
        assert!(matches!(
            set_path(&mut m, &[], &Value::Int(1)),
            SetOutcome::Blocked
        ));
        assert_eq!(remove_path(&mut m, &path(&["a", "b"])), Some(Value::Int(1)));
        assert_eq!(remove_path(&mut m, &path(&["a", "b"])), None);
        assert_eq!(m.get("a"), Some(&Value::Map(Map::new())));
    }
}
