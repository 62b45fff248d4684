//! An independent, deliberately naive model of the language: the paper's
//! `foreach` loops (Figures 6 and 7) written out literally over a list of
//! entities, with tern's decisions applied. It shares nothing with
//! `tern_core::lang::eval` except the AST and the model's atom equality
//! ([`Value::atom_matches`]).

use tern_core::lang::Statement;
use tern_core::lang::ast::{Atom, PropRef, Transfer};
use tern_core::model::{Key, Map, Value};

/// One entity: key, version, value.
#[derive(Debug, Clone, PartialEq)]
pub struct E {
    pub key: Key,
    pub version: u64,
    pub value: Map,
}

/// The naive store: a list of entities.
pub type NState = Vec<E>;

/// Which semantics to model.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mode {
    /// [SE] Figure 6's rename read literally.
    pub literal_rename: bool,
    /// [SE] Figure 7 read literally.
    pub literal_transfer: bool,
}

/// The order the outer loop visits the sources in (the paper leaves it open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Ascending,
    Descending,
}

fn get<'a>(m: &'a Map, path: &[String]) -> Option<&'a Value> {
    let mut cur = m.get(&path[0])?;
    for name in &path[1..] {
        match cur {
            Value::Map(inner) => cur = inner.get(name)?,
            _ => return None,
        }
    }
    Some(cur)
}

/// setProperty along a path: creates missing maps, gives up under a non-map.
fn set(m: &mut Map, path: &[String], v: Value) {
    if path.len() == 1 {
        m.insert(path[0].clone(), v);
        return;
    }
    match m.get(&path[0]) {
        None => {
            let mut inner = Map::new();
            set(&mut inner, &path[1..], v);
            m.insert(path[0].clone(), Value::Map(inner));
        }
        Some(Value::Map(_)) => {
            if let Some(Value::Map(inner)) = m.get_mut(&path[0]) {
                set(inner, &path[1..], v);
            }
        }
        Some(_) => {}
    }
}

/// removeProperty along a path.
fn remove(m: &mut Map, path: &[String]) {
    if path.len() == 1 {
        m.remove(&path[0]);
    } else if let Some(Value::Map(inner)) = m.get_mut(&path[0]) {
        remove(inner, &path[1..]);
    }
}

/// The parent map of a path, if it is there.
fn parent<'a>(m: &'a mut Map, path: &[String]) -> Option<&'a mut Map> {
    if path.len() == 1 {
        return Some(m);
    }
    match m.get_mut(&path[0]) {
        Some(Value::Map(inner)) => parent(inner, &path[1..]),
        _ => None,
    }
}

/// `get(kind = c ∧ θ)`: the entities of `prop`'s kind whose value satisfies `conditions`.
fn selected<'a>(
    state: &'a mut NState,
    prop: &'a PropRef,
    conditions: &'a [Atom],
) -> impl Iterator<Item = &'a mut E> {
    state
        .iter_mut()
        .filter(move |e| e.key.kind == prop.kind && holds(conditions, &e.value))
}

fn holds(atoms: &[Atom], m: &Map) -> bool {
    for a in atoms {
        match get(m, &a.prop.path) {
            Some(v) if v.atom_matches(&a.value) => {}
            _ => return false,
        }
    }
    true
}

/// Runs one statement.
pub fn run(stmt: &Statement, state: &mut NState, mode: Mode, order: Order) {
    match stmt {
        Statement::Add {
            prop,
            value,
            conditions,
        } => {
            // foreach e in get(kind = c ∧ θ) do setProperty(e, n, v) od
            for e in selected(state, prop, conditions) {
                set(&mut e.value, &prop.path, value.clone());
            }
            bump(state, &prop.kind);
        }
        Statement::Delete { prop, conditions } => {
            for e in selected(state, prop, conditions) {
                remove(&mut e.value, &prop.path);
            }
            bump(state, &prop.kind);
        }
        Statement::Rename {
            prop,
            to,
            conditions,
        } => {
            for e in selected(state, prop, conditions) {
                let last = prop.path[prop.path.len() - 1].clone();
                if let Some(p) = parent(&mut e.value, &prop.path) {
                    // setProperty(e, m, getProperty(e, n)); removeProperty(e, n)
                    match p.get(&last).cloned() {
                        Some(v) if last != *to => {
                            p.insert(to.clone(), v);
                            p.remove(&last);
                        }
                        Some(_) => {
                            if mode.literal_rename {
                                p.remove(&last);
                            }
                        }
                        None => {
                            if mode.literal_rename {
                                p.remove(to);
                            }
                        }
                    }
                }
            }
            bump(state, &prop.kind);
        }
        Statement::Move(t) => transfer(t, true, state, mode, order),
        Statement::Copy(t) => transfer(t, false, state, mode, order),
        Statement::RenameKind { from, to } => {
            for e in state.iter_mut() {
                if e.key.kind == *from {
                    e.key.kind = to.clone();
                }
            }
            state.sort_by(|a, b| a.key.cmp(&b.key));
        }
        // Not generated here: `build` is checked against the nested-loop join by the property
        // test of `tern_core::lang::build`.
        Statement::Build(_) => panic!("the naive model covers the paper's statements only"),
    }
}

fn bump(state: &mut NState, kind: &str) {
    for e in state.iter_mut() {
        if e.key.kind == kind {
            e.version += 1;
        }
    }
}

fn joined(t: &Transfer, e: &E, f: &E) -> bool {
    match &t.join {
        None => true,
        Some(j) => {
            // The inner query `b = getProperty(e, a)`: an atom with e.a as the literal.
            match (get(&e.value, &j.source.path), get(&f.value, &j.target.path)) {
                (Some(a), Some(b)) => b.atom_matches(a),
                _ => false,
            }
        }
    }
}

fn transfer(t: &Transfer, is_move: bool, state: &mut NState, mode: Mode, order: Order) {
    // Conditions, joins and values are read from the state before the statement.
    let before = state.clone();
    let mut sources: Vec<usize> = (0..before.len())
        .filter(|&i| {
            before[i].key.kind == t.prop.kind && holds(&t.source_conditions, &before[i].value)
        })
        .collect();
    if order == Order::Descending {
        sources.reverse();
    }
    // For each source, the targets it wrote to.
    let mut wrote_to: Vec<(usize, Vec<usize>)> = Vec::new();
    // foreach e in get(kind = c1 ∧ θ1) do
    for &e in &sources {
        let v = get(&before[e].value, &t.prop.path).cloned();
        if v.is_none() && !mode.literal_transfer {
            continue; // tern: a source without the property writes nothing
        }
        let mut targets = Vec::new();
        // foreach f in get(kind = c2 ∧ θ2) do setProperty(f, n, getProperty(e, n)) od
        for f in 0..before.len() {
            if before[f].key.kind == t.to_kind
                && holds(&t.target_conditions, &before[f].value)
                && joined(t, &before[e], &before[f])
            {
                match &v {
                    Some(v) => set(&mut state[f].value, &t.prop.path, v.clone()),
                    None => remove(&mut state[f].value, &t.prop.path),
                }
                targets.push(f);
            }
        }
        wrote_to.push((e, targets));
    }
    if is_move {
        for &e in &sources {
            let Some(v) = get(&before[e].value, &t.prop.path).cloned() else {
                continue;
            };
            let delivered = mode.literal_transfer
                || wrote_to.iter().filter(|(s, _)| *s == e).any(|(_, fs)| {
                    fs.iter()
                        .any(|&f| get(&state[f].value, &t.prop.path) == Some(&v))
                });
            if delivered {
                // removeProperty(e, n)
                remove(&mut state[e].value, &t.prop.path);
            }
        }
    }
    bump(state, &t.to_kind);
    if is_move {
        bump(state, &t.prop.kind);
    }
}
