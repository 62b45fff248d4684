//! Move and copy by index: the join of \[SE\] Figure 7 and the safety check of
//! Proposition 2 in one scan of each kind, instead of the paper's nested loops.
//!
//! # Why it is exact
//!
//! A source joins a target when the target's `b` atom-matches the source's
//! `a` ([`joins`]): `b` loosely equals `a`, or `b` is an array with an element
//! that loosely equals `a`. Loose equality ([`Value::loosely_equals`]) compares
//! numbers by value and everything else structurally, and nothing equals a
//! value holding a NaN. [`canonical`] maps every value to a representative of
//! its class (integral floats become integers, recursively), or to `None` when
//! it holds a NaN, so that `x.loosely_equals(y)` exactly when both have a
//! canonical form and the two are equal (a property test checks it). Hence:
//!
//! - every source belongs to exactly one **group**, the encoding of the
//!   canonical form of its `a` ([`source_group`]; a source without `a`, or
//!   with a NaN in it, joins nothing);
//! - a target joins exactly the sources of the groups of the canonical forms
//!   of `b` and of `b`'s elements ([`target_groups`]); the groups are disjoint,
//!   so the sources a target joins are the union of its groups, each once;
//! - without a join atom there is one group, which every target meets.
//!
//! What a target becomes depends only on the multiset of (key, value) writes of
//! its joining sources, through [`resolve_target_with`]: whether any source has
//! the property, whether two of them disagree, and (forced) which source has the
//! greatest key. A [`Group`] keeps exactly that, in constant space, and two
//! groups merge into the summary of their union. So the index holds one
//! summary per distinct join value, built in one scan of the sources, and each
//! target is resolved from its few groups in one scan of the targets: the
//! safety check finds every conflicting target without comparing any pair.
//! Only the detail of a conflict (which sources wrote what) needs the sources
//! again: [`conflict_writes`] collects them in one more scan, and only when
//! there is a conflict.
//!
//! [`joins`]: crate::lang::eval::joins
//! [`resolve_target_with`]: crate::lang::eval::resolve_target_with

use std::collections::{BTreeSet, HashMap};

use crate::lang::ast::Transfer;
use crate::lang::conflict::TargetConflict;
use crate::lang::eval::{
    EvalOptions, State, TargetResolution, source_matches, target_matches, transfer_value,
};
use crate::lang::safety::{SafetyReport, static_warnings};
use crate::model::keycode::encode_value;
use crate::model::{Entity, Key, Map, Value};
use crate::store::lookup;

/// The canonical form of a join value: the representative of its class under
/// [`Value::loosely_equals`], or `None` when the value holds a NaN (which
/// loosely equals nothing, not even itself).
///
/// Integral floats in the 64-bit integer range become integers (`1.0` is `1`,
/// `-0.0` is `0`), inside arrays and maps too; everything else stays as it is.
pub fn canonical(value: &Value) -> Option<Value> {
    Some(match value {
        Value::Float(f) if f.is_nan() => return None,
        Value::Float(f) if f.fract() == 0.0 && *f >= -(2f64.powi(63)) && *f < 2f64.powi(63) => {
            Value::Int(*f as i64)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect::<Option<_>>()?),
        Value::Map(map) => Value::Map(
            map.iter()
                .map(|(k, v)| Some((k.clone(), canonical(v)?)))
                .collect::<Option<Map>>()?,
        ),
        other => other.clone(),
    })
}

/// The key of a group of sources: the encoding of the canonical join value
/// (empty for a statement without a join, whose single group every target meets).
pub type GroupKey = Vec<u8>;

fn group_of(value: &Value) -> Option<GroupKey> {
    let canonical = canonical(value)?;
    let mut out = Vec::new();
    encode_value(&canonical, &mut out);
    Some(out)
}

/// The group of a source (which must satisfy θ1): the canonical form of its
/// join value `a`. `None`: it joins no target (it lacks `a`, or `a` holds a NaN).
pub fn source_group(t: &Transfer, source: &Entity) -> Option<GroupKey> {
    match &t.join {
        None => Some(GroupKey::new()),
        Some(join) => group_of(lookup(&source.value, &join.source.path)?),
    }
}

/// The groups of the sources that join a target (which must satisfy θ2):
/// those of `b` and, when `b` is an array, of its elements; sorted, each once.
/// Empty when the target lacks `b`.
pub fn target_groups(t: &Transfer, target: &Entity) -> Vec<GroupKey> {
    let Some(join) = &t.join else {
        return vec![GroupKey::new()];
    };
    let Some(b) = lookup(&target.value, &join.target.path) else {
        return Vec::new();
    };
    let mut groups: Vec<GroupKey> = std::iter::once(b)
        .chain(match b {
            Value::Array(items) => items.iter(),
            _ => [].iter(),
        })
        .filter_map(group_of)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    groups
}

/// What the sources of a group write, in constant space: enough to resolve any
/// target that meets a union of groups exactly as
/// [`resolve_target_with`](crate::lang::eval::resolve_target_with) does.
///
/// Sources are compared by id (all are of the source kind, so this is their
/// key order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// Sources in the group.
    pub sources: u64,
    /// Those that have the property.
    pub with_value: u64,
    /// Two sources with the property write different values (structurally).
    pub mixed: bool,
    /// The source with the greatest id among those with the property, and its
    /// value (the forced winner under tern's semantics; also the value all of
    /// them write when not `mixed`).
    pub last_some: Option<(Value, Value)>,
    /// With [`EvalOptions::literal_transfer`] only (boxed: it costs the
    /// default semantics one pointer).
    pub literal: Option<Box<LiteralEnds>>,
}

/// What the paper's literal semantics also needs of a group.
#[derive(Debug, Clone, PartialEq)]
pub struct LiteralEnds {
    /// The source with the greatest id and its value, if any (the forced winner).
    pub last: (Value, Option<Value>),
    /// The source with the least id among those with the property, and its
    /// value (what the paper's loop sets before a winner without the property
    /// removes it).
    pub first_some: Option<(Value, Value)>,
}

fn keep_greater<T>(slot: &mut Option<(Value, T)>, candidate: Option<(Value, T)>) {
    if let Some(c) = candidate
        && slot.as_ref().is_none_or(|(id, _)| c.0 > *id)
    {
        *slot = Some(c);
    }
}

fn keep_less<T>(slot: &mut Option<(Value, T)>, candidate: Option<(Value, T)>) {
    if let Some(c) = candidate
        && slot.as_ref().is_none_or(|(id, _)| c.0 < *id)
    {
        *slot = Some(c);
    }
}

impl Group {
    /// The group of one source with id `id`, writing `value` (`None`: it lacks
    /// the property).
    pub fn of_source(id: &Value, value: Option<&Value>, opts: &EvalOptions) -> Group {
        let some = value.map(|v| (id.clone(), v.clone()));
        Group {
            sources: 1,
            with_value: u64::from(value.is_some()),
            mixed: false,
            literal: opts.literal_transfer.then(|| {
                Box::new(LiteralEnds {
                    last: (id.clone(), value.cloned()),
                    first_some: some.clone(),
                })
            }),
            last_some: some,
        }
    }

    /// Merges the summary of disjoint sources into this one: the result
    /// summarizes the union.
    pub fn merge(&mut self, other: Group) {
        self.mixed |= other.mixed
            || matches!((&self.last_some, &other.last_some), (Some((_, a)), Some((_, b))) if a != b);
        self.sources += other.sources;
        self.with_value += other.with_value;
        keep_greater(&mut self.last_some, other.last_some);
        match (&mut self.literal, other.literal) {
            (Some(mine), Some(theirs)) => {
                let theirs = *theirs;
                if theirs.last.0 > mine.last.0 {
                    mine.last = theirs.last;
                }
                keep_less(&mut mine.first_some, theirs.first_some);
            }
            (mine @ None, theirs) => *mine = theirs,
            (Some(_), None) => {}
        }
    }

    /// Do the writes disagree (the target would be unsafe)?
    pub fn conflicts(&self, opts: &EvalOptions) -> bool {
        self.mixed
            || (opts.literal_transfer && self.with_value > 0 && self.with_value < self.sources)
    }

    /// How many sources write the target (the iterations of the paper's inner
    /// loop that write): those with the property, or with
    /// [`EvalOptions::literal_transfer`] every joining source.
    pub fn writers(&self, opts: &EvalOptions) -> u64 {
        if opts.literal_transfer {
            self.sources
        } else {
            self.with_value
        }
    }

    /// What a target that these sources join becomes, as
    /// [`resolve_target_with`](crate::lang::eval::resolve_target_with) and,
    /// for a conflict, [`TargetResolution::forced`] decide; and whether it is
    /// a conflict. The resolutions' source lists are left empty (only
    /// [`TargetResolution::apply`] is meant to use them).
    pub fn resolve(&self, opts: &EvalOptions) -> (TargetResolution, bool) {
        if self.sources == 0 {
            return (TargetResolution::Unmatched, false);
        }
        let conflict = self.conflicts(opts);
        let resolution = if !opts.literal_transfer {
            match &self.last_some {
                None => TargetResolution::Lacking {
                    sources: Vec::new(),
                },
                Some((_, value)) => TargetResolution::Set {
                    value: value.clone(),
                    sources: Vec::new(),
                },
            }
        } else if !conflict {
            match &self.last_some {
                Some((_, value)) => TargetResolution::Set {
                    value: value.clone(),
                    sources: Vec::new(),
                },
                None => TargetResolution::Remove {
                    sources: Vec::new(),
                },
            }
        } else {
            match self.literal.as_deref() {
                Some(LiteralEnds {
                    last: (_, Some(value)),
                    ..
                }) => TargetResolution::Set {
                    value: value.clone(),
                    sources: Vec::new(),
                },
                Some(LiteralEnds {
                    first_some: Some((_, earlier)),
                    ..
                }) => TargetResolution::RemoveAfterSet {
                    earlier: earlier.clone(),
                    sources: Vec::new(),
                },
                _ => TargetResolution::Remove {
                    sources: Vec::new(),
                },
            }
        };
        (resolution, conflict)
    }

    /// A rough count of the bytes the summary takes in memory (inline and on
    /// the heap), for a budget.
    pub fn approx_bytes(&self) -> usize {
        let pair = |p: &Option<(Value, Value)>| {
            p.as_ref().map_or(0, |(a, b)| heap_bytes(a) + heap_bytes(b))
        };
        std::mem::size_of::<Group>()
            + pair(&self.last_some)
            + self.literal.as_ref().map_or(0, |l| {
                std::mem::size_of::<LiteralEnds>()
                    + 16
                    + heap_bytes(&l.last.0)
                    + l.last.1.as_ref().map_or(0, heap_bytes)
                    + pair(&l.first_some)
            })
    }
}

/// A rough count of the heap bytes a value owns (its allocations, each with
/// the allocator's overhead), for a budget.
pub fn heap_bytes(value: &Value) -> usize {
    const VALUE: usize = std::mem::size_of::<Value>();
    match value {
        Value::String(s) => 16 + s.len().next_multiple_of(16),
        Value::Bytes(b) => 16 + b.len().next_multiple_of(16),
        Value::Array(items) => 16 + items.iter().map(|v| VALUE + heap_bytes(v)).sum::<usize>(),
        Value::Map(map) => map
            .iter()
            .map(|(k, v)| 64 + k.len() + VALUE + heap_bytes(v))
            .sum(),
        _ => 0,
    }
}

/// Merges the groups a target meets (disjoint by construction) into one.
pub fn union<'a>(groups: impl IntoIterator<Item = &'a Group>) -> Group {
    let mut out = Group::default();
    for g in groups {
        out.merge(g.clone());
    }
    out
}

/// The writes of a conflicting target, as [`TargetConflict::writes`] lists
/// them: every joining source (with [`EvalOptions::literal_transfer`]) or
/// every joining source with the property, in key order. `entries` holds the
/// sources of the target's groups, in any order.
pub fn conflict_writes(
    entries: impl IntoIterator<Item = (Key, Option<Value>)>,
    opts: &EvalOptions,
) -> Vec<(Key, Option<Value>)> {
    let mut writes: Vec<(Key, Option<Value>)> = entries
        .into_iter()
        .filter(|(_, v)| opts.literal_transfer || v.is_some())
        .collect();
    writes.sort_by(|a, b| a.0.cmp(&b.0));
    writes
}

/// The safety check of a move or copy by index, over an in-memory state: one
/// pass over the sources builds the groups, one pass over the targets resolves
/// each from its groups, and only when a target conflicts one more pass over
/// the sources lists its writes. Equal to the paper's pairwise dry run
/// [`check_transfer_with`](crate::lang::safety::check_transfer_with) (a
/// property test checks it), conflicts in target key order.
pub fn check_transfer_indexed(t: &Transfer, state: &State, opts: &EvalOptions) -> SafetyReport {
    let mut groups: HashMap<GroupKey, Group> = HashMap::new();
    let sources = state.values().filter(|e| source_matches(t, e));
    for source in sources.clone() {
        if let Some(g) = source_group(t, source) {
            let one = Group::of_source(&source.key.id, transfer_value(t, source), opts);
            match groups.get_mut(&g) {
                Some(existing) => existing.merge(one),
                None => {
                    groups.insert(g, one);
                }
            }
        }
    }
    let mut report = SafetyReport {
        warnings: static_warnings(t),
        ..SafetyReport::default()
    };
    let mut conflicting: Vec<(Key, Vec<GroupKey>)> = Vec::new();
    for target in state.values().filter(|e| e.key.kind == t.to_kind) {
        report.targets_examined += 1;
        if !target_matches(t, target) {
            continue;
        }
        let keys = target_groups(t, target);
        let group = union(keys.iter().filter_map(|k| groups.get(k)));
        let writers = group.writers(opts);
        if writers > 0 {
            report.targets_written += 1;
            report.writes += writers;
        }
        if group.conflicts(opts) {
            report.conflict_count += 1;
            conflicting.push((target.key.clone(), keys));
        }
    }
    if conflicting.is_empty() {
        return report;
    }
    let wanted: BTreeSet<&GroupKey> = conflicting.iter().flat_map(|(_, k)| k).collect();
    let mut entries: HashMap<&GroupKey, Vec<(Key, Option<Value>)>> = HashMap::new();
    for source in sources {
        if let Some(g) = source_group(t, source)
            && let Some(g) = wanted.get(&g)
        {
            entries
                .entry(g)
                .or_default()
                .push((source.key.clone(), transfer_value(t, source).cloned()));
        }
    }
    for (target, keys) in &conflicting {
        let writes = conflict_writes(
            keys.iter()
                .filter_map(|k| entries.get(k))
                .flatten()
                .cloned(),
            opts,
        );
        report.conflicts.push(TargetConflict {
            target: target.clone(),
            writes,
        });
    }
    report
}
