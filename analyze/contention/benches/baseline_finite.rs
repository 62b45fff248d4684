//! The finite cross-check as it was before (commit 41a462b): every key of Σ
//! tried per parent and atom, a hash map copied per try, full rounds. Kept
//! here only as the benchmark's baseline; returns whether it found SAFE.
#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    dead_code,
    unreachable_pub
)]

use std::collections::{HashMap, VecDeque};

use tern_contention::finite::Domains;
use tern_contention::grammar::{Grammar, Template, Term};

// The NFA is the crate's own, unchanged since the baseline: its file, compiled into the
// benchmark (where its `super::grammar` is this `grammar`).
use tern_contention::grammar;
#[path = "../src/nfa.rs"]
mod nfa;
use nfa::Nfa;

type Binding = HashMap<String, String>;

/// Matches a template against key values, extending `b`.
fn matches(t: &Template, values: &[String], b: &Binding) -> Option<Binding> {
    let mut b = b.clone();
    for (a, v) in t.args.iter().zip(values) {
        match a {
            Term::Const(c) if c != v => return None,
            Term::Const(_) => {}
            Term::Var(x) => match b.get(x) {
                Some(have) if have != v => return None,
                Some(_) => {}
                None => {
                    b.insert(x.clone(), v.clone());
                }
            },
        }
    }
    Some(b)
}

/// The users who may write a key (A_w's rules `q_u ← k(q_u*)` for this label).
pub(crate) fn writers(g: &Grammar, d: &Domains, ctor: usize, values: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in g.writes.iter().filter(|w| w.key.ctor == ctor) {
        let Some(b) = matches(&w.key, values, &Binding::new()) else {
            continue;
        };
        let who: Vec<String> = match &w.writer {
            Term::Const(c) => vec![c.clone()],
            Term::Var(x) => match b.get(x) {
                Some(u) => vec![u.clone()],
                None => d.users().to_vec(),
            },
        };
        for u in who {
            if !out.contains(&u) {
                out.push(u);
            }
        }
    }
    out
}

/// Per key: each reachable A_w state set with the (child key, child set) sequence that first gave it.
type Reach = Vec<Vec<(u128, Vec<(usize, u128)>)>>;

/// An exploration node: NFA state, running set, predecessor node and the child read.
type Node = (usize, u128, Option<(usize, (usize, u128))>);

struct Alphabet {
    keys: Vec<(usize, Vec<String>)>,
}

fn alphabet(g: &Grammar, d: &Domains) -> Alphabet {
    let mut keys = Vec::new();
    for (ctor, k) in g.keys.iter().enumerate() {
        let mut tuples: Vec<Vec<String>> = vec![Vec::new()];
        for s in &k.sorts {
            let vals = d.0.get(s).cloned().unwrap_or_default();
            tuples = tuples
                .into_iter()
                .flat_map(|t| {
                    vals.iter().map(move |v| {
                        let mut t = t.clone();
                        t.push(v.clone());
                        t
                    })
                })
                .collect();
        }
        keys.extend(tuples.into_iter().map(|t| (ctor, t)));
    }
    Alphabet { keys }
}

/// The most users the finite check handles (one bit each).
pub(crate) const MAX_USERS: usize = 128;

/// Runs the paper's algorithm over the given domains (at most [`MAX_USERS`] users).
pub(crate) fn check(g: &Grammar, d: &Domains) -> bool {
    let sigma = alphabet(g, d);
    let users = &d.users()[..d.users().len().min(MAX_USERS)];
    // A_w: the writers of each key, as a bit set over `users`.
    let mut wmask = Vec::with_capacity(sigma.keys.len());
    let mut ambiguous = None;
    for (ctor, vals) in &sigma.keys {
        let who = writers(g, d, *ctor, vals);
        if who.len() > 1 && ambiguous.is_none() {
            ambiguous = Some(());
        }
        let mut m = 0u128;
        for u in &who {
            if let Some(i) = users.iter().position(|x| x == u) {
                m |= 1 << i;
            }
        }
        wmask.push(m);
    }
    let alphabet = sigma.keys.len();
    if ambiguous.is_some() {
        return false;
    }
    // A_s: for each key σ and each atom occurrence of its production, the
    // keys τ whose state q_τ the occurrence stands for (the `|_{x∈X}` expansion).
    let nfas: Vec<Option<Nfa>> = (0..g.keys.len())
        .map(|c| g.production(c).map(|p| Nfa::new(&p.rhs)))
        .collect();
    let mut letters: Vec<HashMap<usize, Vec<usize>>> = Vec::with_capacity(alphabet);
    for (ctor, vals) in &sigma.keys {
        let mut per_occ = HashMap::new();
        if let Some(p) = g.production(*ctor) {
            let b: Binding = p.params.iter().cloned().zip(vals.iter().cloned()).collect();
            p.rhs.visit(&mut |occ, t| {
                let ids: Vec<usize> = sigma
                    .keys
                    .iter()
                    .enumerate()
                    .filter(|(_, (c, v))| *c == t.ctor && matches(t, v, &b).is_some())
                    .map(|(i, _)| i)
                    .collect();
                per_occ.insert(occ, ids);
            });
        }
        letters.push(per_occ);
    }
    // The product: reachable (σ, S) pairs with the children that first gave them.
    let mut reach: Reach = vec![Vec::new(); alphabet];
    loop {
        let mut changed = false;
        for s in 0..alphabet {
            let ctor = sigma.keys[s].0;
            let Some(nfa) = &nfas[ctor] else { continue };
            for (mask, kids) in explore(nfa, &letters[s], &reach, wmask[s]) {
                if !reach[s].iter().any(|(m, _)| *m == mask) {
                    reach[s].push((mask, kids));
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    // Final states: q_φ for every key φ matching an atom of `root`.
    let roots: Vec<usize> = (0..alphabet)
        .filter(|&i| {
            let (c, v) = &sigma.keys[i];
            g.root
                .atoms()
                .iter()
                .any(|t| t.ctor == *c && matches(t, v, &Binding::new()).is_some())
        })
        .collect();
    let bad = roots
        .iter()
        .find_map(|&r| reach[r].iter().any(|(m, _)| *m == 0).then_some(r));
    bad.is_none()
}

/// All A_w state sets a node σ can get, with a child sequence giving each:
/// a breadth-first walk over (NFA state, running intersection).
fn explore(
    nfa: &Nfa,
    letters: &HashMap<usize, Vec<usize>>,
    reach: &Reach,
    start_mask: u128,
) -> Vec<(u128, Vec<(usize, u128)>)> {
    let mut seen: HashMap<(usize, u128), usize> = HashMap::new();
    // node: (nfa state, mask, predecessor node, child read)
    let mut nodes: Vec<Node> = Vec::new();
    let mut queue = VecDeque::new();
    for s in nfa.closure(&[nfa.start]) {
        if seen.insert((s, start_mask), nodes.len()).is_none() {
            nodes.push((s, start_mask, None));
            queue.push_back(nodes.len() - 1);
        }
    }
    while let Some(n) = queue.pop_front() {
        let (state, mask, _) = nodes[n];
        for &(occ, to) in &nfa.atom[state] {
            for &tau in letters.get(&occ).map_or(&[][..], Vec::as_slice) {
                for (m, _) in &reach[tau] {
                    let nm = mask & m;
                    for t in nfa.closure(&[to]) {
                        if let std::collections::hash_map::Entry::Vacant(e) = seen.entry((t, nm)) {
                            e.insert(nodes.len());
                            nodes.push((t, nm, Some((n, (tau, *m)))));
                            queue.push_back(nodes.len() - 1);
                        }
                    }
                }
            }
        }
    }
    let mut out: Vec<(u128, Vec<(usize, u128)>)> = Vec::new();
    for (i, &(s, mask, _)) in nodes.iter().enumerate() {
        if s != nfa.accept || out.iter().any(|(m, _)| *m == mask) {
            continue;
        }
        let mut kids = Vec::new();
        let mut cur = i;
        while let Some((prev, kid)) = nodes[cur].2 {
            kids.push(kid);
            cur = prev;
        }
        kids.reverse();
        out.push((mask, kids));
    }
    out
}
