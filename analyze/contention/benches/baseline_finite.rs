//! The finite cross-check as it was before (commit 41a462b): every key of Σ
//! tried per parent and atom, a hash map copied per try, full rounds. Kept
//! here only as the benchmark's baseline; returns whether it found SAFE. What
//! did not change (template matching, the writers of a key, the NFA, the
//! walk's bookkeeping) is the crate's own code, called or compiled in here, so
//! the comparison measures only the algorithm that changed.
#![allow(
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    dead_code,
    unreachable_pub
)]

use std::collections::HashMap;

use tern_contention::finite::{Domains, MAX_USERS, writers};
use tern_contention::grammar::Grammar;
// What the new check still shares with this one (template matching, the walk's
// bookkeeping, adding found sets): the crate's own functions, not copies.
use tern_contention::product::{Binding, Found, Reach, Walk, add_found, first_unwritable, matches};

// The NFA is the crate's own, unchanged since the baseline: its file, compiled into the
// benchmark (where its `super::grammar` is this `grammar`).
use tern_contention::grammar;
#[path = "../src/nfa.rs"]
mod nfa;
use nfa::Nfa;

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
            let found = explore(nfa, &letters[s], &reach, wmask[s]);
            changed |= add_found(&mut reach[s], found);
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
    first_unwritable(&roots, &reach).is_none()
}

/// All A_w state sets a node σ can get, with a child sequence giving each:
/// a breadth-first walk over (NFA state, running intersection).
fn explore(
    nfa: &Nfa,
    letters: &HashMap<usize, Vec<usize>>,
    reach: &Reach,
    start_mask: u128,
) -> Found {
    let mut walk = Walk::default();
    for s in nfa.closure(&[nfa.start]) {
        walk.visit(s, start_mask, None);
    }
    while let Some((n, state, mask)) = walk.next_node() {
        for &(occ, to) in &nfa.atom[state] {
            for &tau in letters.get(&occ).map_or(&[][..], Vec::as_slice) {
                for (m, _) in &reach[tau] {
                    for t in nfa.closure(&[to]) {
                        walk.visit(t, mask & m, Some((n, (tau, *m))));
                    }
                }
            }
        }
    }
    walk.accepted(nfa.accept)
}
