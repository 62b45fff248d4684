//! proptest: the reference semantics against the naive model, on small random
//! states (two kinds, at most six entities each, tiny value domains so that
//! joins, collisions and conflicts are frequent) and random statements.

use proptest::prelude::*;
use tern_core::lang::Statement;
use tern_core::lang::ast::{Atom, Join, PropRef, Span, Transfer};
use tern_core::lang::eval::*;
use tern_core::lang::safety::{SafetyChecker, StaticWarning, check_transfer_with};
use tern_core::model::{Entity, Key, Value};

use crate::naive::{self, E, Mode, NState, Order};

const KINDS: [&str; 2] = ["u", "p"];
const NAMES: [&str; 3] = ["a", "b", "c"];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(Value::Int(1)),
        1 => Just(Value::Float(1.0)),
        2 => Just(Value::String("x".into())),
        1 => Just(Value::Int(2)),
        1 => Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => scalar(),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(Value::Array),
        1 => prop::collection::btree_map(name(), scalar(), 0..3).prop_map(Value::Map),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop::sample::select(&NAMES[..]).prop_map(str::to_owned)
}

fn path() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![3 => name().prop_map(|n| vec![n]), 1 => prop::collection::vec(name(), 2..=2)]
}

fn atom_path() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![7 => name().prop_map(|n| vec![n]), 1 => prop::collection::vec(name(), 2..=2)]
}

fn prop_ref(
    kind: &'static str,
    path: impl Strategy<Value = Vec<String>>,
) -> impl Strategy<Value = PropRef> {
    path.prop_map(move |path| PropRef {
        kind: kind.to_owned(),
        path,
        span: Span::default(),
    })
}

fn atoms(kind: &'static str) -> impl Strategy<Value = Vec<Atom>> {
    let atom = move || {
        (prop_ref(kind, atom_path()), scalar()).prop_map(|(prop, value)| Atom { prop, value })
    };
    // Mostly no condition or one, so that statements match often.
    prop_oneof![
        4 => Just(Vec::new()),
        2 => prop::collection::vec(atom(), 1..=1),
        1 => prop::collection::vec(atom(), 2..=2),
    ]
}

/// A value map in which each of the few names is present with probability 3/4.
fn props() -> impl Strategy<Value = tern_core::model::Map> {
    [(); 3]
        .map(|()| prop::option::weighted(0.75, value()))
        .prop_map(|values| {
            NAMES
                .iter()
                .zip(values)
                .filter_map(|(n, v)| Some(((*n).to_owned(), v?)))
                .collect()
        })
}

pub(crate) fn state() -> impl Strategy<Value = State> {
    let kind = |k: &'static str| {
        prop::collection::btree_map(0i64..6, (0u64..3, props()), 1..=6).prop_map(move |m| {
            m.into_iter()
                .map(|(id, (version, value))| Entity {
                    key: Key {
                        kind: k.to_owned(),
                        id: Value::Int(id),
                    },
                    version,
                    value,
                })
                .collect::<Vec<_>>()
        })
    };
    (kind("u"), kind("p"))
        .prop_map(|(a, b)| a.into_iter().chain(b).map(|e| (e.key.clone(), e)).collect())
}

fn local_statement() -> impl Strategy<Value = Statement> {
    prop::sample::select(&KINDS[..]).prop_flat_map(|k| {
        prop_oneof![
            (prop_ref(k, path()), value(), atoms(k)).prop_map(|(prop, value, conditions)| {
                Statement::Add {
                    prop,
                    value,
                    conditions,
                }
            }),
            (prop_ref(k, path()), atoms(k))
                .prop_map(|(prop, conditions)| Statement::Delete { prop, conditions }),
            (prop_ref(k, path()), name(), atoms(k)).prop_map(|(prop, to, conditions)| {
                Statement::Rename {
                    prop,
                    to,
                    conditions,
                }
            }),
        ]
    })
}

pub(crate) fn transfer() -> impl Strategy<Value = Transfer> {
    prop::bool::ANY.prop_flat_map(|flip| {
        let (s, t) = if flip { ("p", "u") } else { ("u", "p") };
        let moved = prop_oneof![5 => name().prop_map(|n| vec![n]), 1 => path()];
        let join = prop::option::weighted(
            0.8,
            (
                prop_ref(s, name().prop_map(|n| vec![n])),
                prop_ref(t, name().prop_map(|n| vec![n])),
            )
                .prop_map(|(source, target)| Join { source, target }),
        );
        (prop_ref(s, moved), join, atoms(s), atoms(t)).prop_map(
            move |(prop, join, source_conditions, target_conditions)| Transfer {
                prop,
                to_kind: t.to_owned(),
                join,
                source_conditions,
                target_conditions,
            },
        )
    })
}

pub(crate) fn transfer_statement() -> impl Strategy<Value = Statement> {
    (prop::bool::ANY, transfer()).prop_map(|(is_move, t)| {
        if is_move {
            Statement::Move(t)
        } else {
            Statement::Copy(t)
        }
    })
}

fn any_statement() -> impl Strategy<Value = Statement> {
    prop_oneof![local_statement(), transfer_statement()]
}

pub(crate) fn modes() -> impl Strategy<Value = (EvalOptions, Mode)> {
    (prop::bool::ANY, prop::bool::ANY).prop_map(|(r, t)| {
        (
            EvalOptions {
                literal_rename: r,
                literal_transfer: t,
                ..EvalOptions::default()
            },
            Mode {
                literal_rename: r,
                literal_transfer: t,
            },
        )
    })
}

fn to_naive(s: &State) -> NState {
    s.values()
        .map(|e| E {
            key: e.key.clone(),
            version: e.version,
            value: e.value.clone(),
        })
        .collect()
}

fn naive_run(stmt: &Statement, s: &State, mode: Mode, order: Order) -> NState {
    let mut n = to_naive(s);
    naive::run(stmt, &mut n, mode, order);
    n
}

pub(crate) fn transfer_of(stmt: &Statement) -> Option<&Transfer> {
    match stmt {
        Statement::Move(t) | Statement::Copy(t) => Some(t),
        _ => None,
    }
}

/// The engine's way: targets in batches (each looks up its sources with a scan
/// filter), then for a move the sources (each looks up the targets it reached).
fn engine_simulation(stmt: &Statement, before: &State, opts: &EvalOptions) -> State {
    let Some(t) = transfer_of(stmt) else {
        unreachable!()
    };
    let scan = |s: &State, kind: &str, conds: &[tern_core::store::Condition]| -> Vec<Entity> {
        s.values()
            .filter(|e| e.key.kind == kind && conds.iter().all(|c| c.matches_map(&e.value)))
            .cloned()
            .collect()
    };
    let mut after = before.clone();
    for target in scan(before, &t.to_kind, &target_query(t)) {
        let candidates = source_query(t, &target)
            .map(|q| scan(before, &t.prop.kind, &q))
            .unwrap_or_default();
        let refs: Vec<&Entity> = candidates.iter().collect();
        let mut resolution = resolve_target_with(t, &target, &refs, opts);
        if opts.force {
            resolution = resolution.forced();
        }
        if let Some(entity) = after.get_mut(&target.key) {
            resolution.apply(t, &mut entity.value).unwrap();
        }
    }
    if matches!(stmt, Statement::Move(_)) {
        for source in scan(before, &t.prop.kind, &[]) {
            let reached = delivery_query(t, &source)
                .map(|q| scan(&after, &t.to_kind, &q))
                .unwrap_or_default();
            let refs: Vec<&Entity> = reached.iter().collect();
            let outcome = move_source_outcome(t, &source, &refs, opts);
            if let Some(entity) = after.get_mut(&source.key) {
                outcome.apply(t, &mut entity.value);
            }
        }
    }
    for kind in stmt.written_kinds() {
        for e in after.values_mut().filter(|e| e.key.kind == kind) {
            e.version += 1;
        }
    }
    after
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// add, delete, rename: the reference equals the naive loop (data and versions).
    #[test]
    fn local_statements_agree_with_the_naive_model(s in state(), stmt in local_statement(), (opts, mode) in modes()) {
        let mut reference = s.clone();
        let report = apply_statement(&stmt, &mut reference, &opts).unwrap();
        prop_assert_eq!(to_naive(&reference), naive_run(&stmt, &s, mode, Order::Ascending));
        let step = &report.steps[0];
        prop_assert_eq!(step.entities as usize, s.keys().filter(|k| k.kind == step.kind).count());
        let changed = s.iter().filter(|(k, e)| reference[*k].value != e.value).count();
        prop_assert_eq!(step.changed as usize, changed);
    }

    /// Lazy = eager: step_local on each entity gives the reference's data.
    #[test]
    fn step_local_is_the_per_entity_reference(s in state(), stmt in local_statement(), (opts, _) in modes()) {
        let mut reference = s.clone();
        apply_statement(&stmt, &mut reference, &opts).unwrap();
        for (key, entity) in &s {
            let mut value = entity.value.clone();
            let effect = if key.kind == stmt.written_kinds()[0] {
                step_local(&stmt, &mut value, &opts).unwrap()
            } else {
                LocalEffect::NotMatched
            };
            prop_assert_eq!(&value, &reference[key].value);
            prop_assert_eq!(effect.is_changed(), value != entity.value);
        }
    }

    /// move, copy: safe ⇒ the reference equals the naive loop in both source
    /// orders; unsafe ⇒ refused without change, and forced = the naive loop in
    /// ascending key order; order-dependent ⇒ flagged unsafe.
    #[test]
    fn transfers_agree_with_the_naive_model(s in state(), stmt in transfer_statement(), (opts, mode) in modes()) {
        let t = transfer_of(&stmt).unwrap();
        let check = check_transfer_with(t, &s, &opts);
        let ascending = naive_run(&stmt, &s, mode, Order::Ascending);
        let descending = naive_run(&stmt, &s, mode, Order::Descending);
        if ascending != descending {
            prop_assert!(!check.is_safe(), "order-dependent but not flagged");
        }
        let mut reference = s.clone();
        let result = apply_statement(&stmt, &mut reference, &opts);
        if check.is_safe() {
            let report = result.unwrap();
            prop_assert_eq!(to_naive(&reference), ascending.clone());
            prop_assert_eq!(to_naive(&reference), descending);
            prop_assert!(report.transfer.unwrap().conflicts.is_empty());
        } else {
            match result {
                Err(EvalError::Unsafe { conflicts, .. }) => prop_assert_eq!(conflicts, check.conflicts.clone()),
                other => prop_assert!(false, "expected Unsafe, got {:?}", other),
            }
            prop_assert_eq!(&reference, &s);
        }
        let forced_opts = EvalOptions { force: true, ..opts };
        let mut forced = s.clone();
        let report = apply_statement(&stmt, &mut forced, &forced_opts).unwrap();
        prop_assert_eq!(to_naive(&forced), ascending);
        prop_assert_eq!(report.transfer.unwrap().conflicts, check.conflicts);
    }

    /// The streaming checker fed target by target equals the paper's nested-loop dry run.
    #[test]
    fn streaming_checker_equals_the_dry_run(s in state(), t in transfer(), (opts, _) in modes()) {
        let dry = check_transfer_with(&t, &s, &opts);
        let sources: Vec<&Entity> = s.values().filter(|e| e.key.kind == t.prop.kind).collect();
        let mut checker = SafetyChecker::new(&t, &opts);
        for target in s.values().filter(|e| e.key.kind == t.to_kind) {
            checker.feed(target, &sources);
        }
        prop_assert_eq!(checker.finish(), dry);
    }

    /// The target-driven engine built from the building blocks equals the reference.
    #[test]
    fn target_driven_engine_equals_the_reference(s in state(), stmt in transfer_statement(), (opts, _) in modes(), force in prop::bool::ANY) {
        let t = transfer_of(&stmt).unwrap();
        prop_assume!(!static_reads_moved(t));
        let opts = EvalOptions { force, ..opts };
        let mut reference = s.clone();
        if apply_statement(&stmt, &mut reference, &opts).is_ok() {
            prop_assert_eq!(engine_simulation(&stmt, &s, &opts), reference);
        }
    }

    /// Scripts: statement by statement, the reference equals the naive model.
    #[test]
    fn scripts_agree_with_the_naive_model(s in state(), script in prop::collection::vec(any_statement(), 1..4), (opts, mode) in modes()) {
        let mut reference = s.clone();
        let mut model = to_naive(&s);
        match apply_script(&script, &mut reference, &opts) {
            Ok(reports) => prop_assert_eq!(reports.len(), script.len()),
            Err(e) => {
                let is_unsafe = matches!(e.error, EvalError::Unsafe { .. });
                prop_assert!(is_unsafe);
                prop_assert_eq!(e.completed.len(), e.index);
                for stmt in &script[..e.index] {
                    naive::run(stmt, &mut model, mode, Order::Ascending);
                }
                prop_assert_eq!(to_naive(&reference), model);
                return Ok(());
            }
        }
        for stmt in &script {
            naive::run(stmt, &mut model, mode, Order::Ascending);
        }
        prop_assert_eq!(to_naive(&reference), model);
    }
}

pub(crate) fn static_reads_moved(t: &Transfer) -> bool {
    tern_core::lang::safety::static_warnings(t)
        .iter()
        .any(|w| matches!(w, StaticWarning::ReadsTransferredProperty { .. }))
}
