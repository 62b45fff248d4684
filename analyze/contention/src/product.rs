//! The parts of the finite check's product construction that it shares with
//! the benchmark's frozen baseline (`benches/baseline_finite.rs`, the algorithm
//! before it was made fast): matching a template against key values, the
//! breadth-first walk over (NFA state, running set) with the child sequence
//! that first reached each node, and adding a node's found sets to the
//! reachable ones. Both algorithms call these same functions, so the benchmark
//! compares only what differs. Public for that benchmark alone; not part of
//! the crate's API.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use crate::grammar::{Template, Term};

/// Variable name → value.
pub type Binding = HashMap<String, String>;

/// Matches a template against key values, extending `b`.
pub fn matches(t: &Template, values: &[String], b: &Binding) -> Option<Binding> {
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

/// A child read: the child key and its A_w state set.
pub type Kid = (usize, u128);

/// The A_w state sets a node can get, each with the child sequence that first gave it.
pub type Found = Vec<(u128, Vec<Kid>)>;

/// Per key: each reachable A_w state set with the child sequence that first gave it.
pub type Reach = Vec<Found>;

/// A walk node: NFA state, running set, predecessor node and the child read.
type Node = (usize, u128, Option<(usize, Kid)>);

/// A breadth-first walk over (NFA state, running intersection of A_w sets):
/// each pair is visited once, remembering how it was first reached.
#[derive(Debug, Default)]
pub struct Walk {
    seen: HashMap<(usize, u128), usize>,
    nodes: Vec<Node>,
    queue: VecDeque<usize>,
}

impl Walk {
    /// Queues (`state`, `mask`) unless already visited; `from` is the node it
    /// is reached from and the child read on the way (`None` at the start).
    #[inline]
    pub fn visit(&mut self, state: usize, mask: u128, from: Option<(usize, Kid)>) {
        if let Entry::Vacant(e) = self.seen.entry((state, mask)) {
            e.insert(self.nodes.len());
            self.nodes.push((state, mask, from));
            self.queue.push_back(self.nodes.len() - 1);
        }
    }

    /// The next queued node: its index (for [`Walk::visit`]'s `from`), NFA state and set.
    #[inline]
    pub fn next_node(&mut self) -> Option<(usize, usize, u128)> {
        let n = self.queue.pop_front()?;
        let (state, mask, _) = self.nodes[n];
        Some((n, state, mask))
    }

    /// Each distinct set visited at the NFA state `accept`, with the child
    /// sequence that first reached it.
    pub fn accepted(&self, accept: usize) -> Found {
        let mut out: Found = Vec::new();
        for (i, &(s, mask, _)) in self.nodes.iter().enumerate() {
            if s != accept || out.iter().any(|(m, _)| *m == mask) {
                continue;
            }
            let mut kids = Vec::new();
            let mut cur = i;
            while let Some((prev, kid)) = self.nodes[cur].2 {
                kids.push(kid);
                cur = prev;
            }
            kids.reverse();
            out.push((mask, kids));
        }
        out
    }
}

/// Adds to a key's reachable sets those of `found` it lacks; whether any was new.
pub fn add_found(reach: &mut Found, found: Found) -> bool {
    let mut changed = false;
    for (mask, kids) in found {
        if !reach.iter().any(|(m, _)| *m == mask) {
            reach.push((mask, kids));
            changed = true;
        }
    }
    changed
}

/// The first of `roots` that can get the empty set (a tree no user may write).
pub fn first_unwritable(roots: &[usize], reach: &Reach) -> Option<usize> {
    roots
        .iter()
        .copied()
        .find(|&r| reach[r].iter().any(|(m, _)| *m == 0))
}
