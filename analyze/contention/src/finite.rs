//! The paper's algorithm on a finite alphabet: the key templates are
//! instantiated over finite sets of values per sort, giving the alphabet Σ;
//! from them the hedge automata A_s (one state q_σ per key σ) and A_w (one
//! state q_u per user), the nondeterminism test of A_w, and the containment
//! L(A_s) ⊆ L(A_w) by the standard product construction: bottom-up, the
//! reachable pairs (q_σ, S) where S is the set of A_w states the same tree
//! can reach. L(A_s) ⊄ L(A_w) iff a pair (q_φ, ∅) is reachable with q_φ final.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use crate::grammar::{Grammar, Template, Term, USER_SORT, show_key};
use crate::nfa::Nfa;

/// The finite value set of each sort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domains(pub BTreeMap<String, Vec<String>>);

impl Domains {
    /// Values per sort: the constants written in the file, then the
    /// `domain` names, then generated ones, up to `fresh` values that are not
    /// constants. `2 * max_arity + 2` fresh values ([`Domains::sufficient`])
    /// are enough for the finite check to find every counterexample the
    /// symbolic one finds (docs/contention.md).
    pub fn new(g: &Grammar, fresh: usize) -> Domains {
        let consts = g.constants();
        let mut out = BTreeMap::new();
        for sort in g.sorts() {
            let c = consts.get(&sort).cloned().unwrap_or_default();
            let mut vals = c.clone();
            let mut names: Vec<String> = g.domains.get(&sort).cloned().unwrap_or_default();
            let prefix = if sort == USER_SORT {
                "user"
            } else {
                sort.as_str()
            };
            let mut n = 1;
            while names.iter().filter(|v| !c.contains(v)).count() < fresh {
                let name = format!("{prefix}{n}");
                n += 1;
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            for v in names.into_iter().filter(|v| !c.contains(v)).take(fresh) {
                vals.push(v);
            }
            out.insert(sort, vals);
        }
        Domains(out)
    }

    /// The number of fresh values per sort the small-model argument needs.
    pub fn sufficient(g: &Grammar) -> usize {
        2 * g.max_arity() + 2
    }

    /// The users.
    pub fn users(&self) -> &[String] {
        self.0.get(USER_SORT).map_or(&[], Vec::as_slice)
    }

    /// The number of keys (Σ) these domains give.
    pub fn alphabet_size(&self, g: &Grammar) -> usize {
        g.keys
            .iter()
            .map(|k| {
                k.sorts
                    .iter()
                    .map(|s| self.0.get(s).map_or(0, Vec::len))
                    .product::<usize>()
            })
            .sum()
    }
}

/// A concrete entity-group tree: keys with their children.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tree {
    /// The key constructor's name.
    pub kind: String,
    /// The key's values.
    pub values: Vec<String>,
    /// The children, in order.
    pub children: Vec<Tree>,
}

impl Tree {
    /// A node.
    pub fn node(kind: &str, values: &[&str], children: Vec<Tree>) -> Tree {
        Tree {
            kind: kind.to_owned(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            children,
        }
    }

    /// The key as text, `comments(Dave, a1)`.
    pub fn key(&self) -> String {
        let args: Vec<Term> = self.values.iter().cloned().map(Term::Var).collect();
        show_key(&self.kind, &args)
    }

    /// Number of nodes.
    pub fn size(&self) -> usize {
        1 + self.children.iter().map(Tree::size).sum::<usize>()
    }
}

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
pub fn writers(g: &Grammar, d: &Domains, ctor: usize, values: &[String]) -> Vec<String> {
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

/// The result of the finite check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FiniteResult {
    /// |Σ|: the number of keys after instantiation.
    pub alphabet: usize,
    /// A key two users can write, with those users (A_w is nondeterministic).
    pub ambiguous: Option<(String, Vec<String>)>,
    /// L(A_s) ⊆ L(A_w); `None` when not decided (A_w nondeterministic).
    pub contained: Option<bool>,
    /// A tree in L(A_s) \ L(A_w), when containment fails.
    pub counterexample: Option<Tree>,
}

impl FiniteResult {
    /// SAFE iff A_w is deterministic and the containment holds.
    pub fn safe(&self) -> bool {
        self.ambiguous.is_none() && self.contained == Some(true)
    }
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
pub const MAX_USERS: usize = 128;

/// Runs the paper's algorithm over the given domains (at most [`MAX_USERS`] users).
pub fn check(g: &Grammar, d: &Domains) -> FiniteResult {
    let sigma = alphabet(g, d);
    let users = &d.users()[..d.users().len().min(MAX_USERS)];
    // A_w: the writers of each key, as a bit set over `users`.
    let mut wmask = Vec::with_capacity(sigma.keys.len());
    let mut ambiguous = None;
    for (ctor, vals) in &sigma.keys {
        let who = writers(g, d, *ctor, vals);
        if who.len() > 1 && ambiguous.is_none() {
            ambiguous = Some((show_values(g.name(*ctor), vals), who.clone()));
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
        return FiniteResult {
            alphabet,
            ambiguous,
            contained: None,
            counterexample: None,
        };
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
    let counterexample = bad.map(|r| build_tree(g, &sigma, &reach, r, 0));
    FiniteResult {
        alphabet,
        ambiguous: None,
        contained: Some(bad.is_none()),
        counterexample,
    }
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

fn build_tree(g: &Grammar, sigma: &Alphabet, reach: &Reach, s: usize, mask: u128) -> Tree {
    let (ctor, vals) = &sigma.keys[s];
    let kids = reach[s]
        .iter()
        .find(|(m, _)| *m == mask)
        .map(|(_, k)| k.clone())
        .unwrap_or_default();
    Tree {
        kind: g.name(*ctor).to_owned(),
        values: vals.clone(),
        children: kids
            .into_iter()
            .map(|(t, m)| build_tree(g, sigma, reach, t, m))
            .collect(),
    }
}

fn show_values(name: &str, vals: &[String]) -> String {
    let args: Vec<Term> = vals.iter().cloned().map(Term::Var).collect();
    show_key(name, &args)
}

/// The state A_s assigns to each node of a concrete tree (`None` where no
/// rule applies), children first, and whether the root gets a final state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run<S> {
    /// The node's state.
    pub state: S,
    /// The children's runs.
    pub children: Vec<Run<S>>,
}

/// Runs A_s bottom-up on a tree: a node gets `q_σ` (shown as `q_` and its key)
/// when its children all have states and their sequence matches σ's production.
pub fn run_schema(g: &Grammar, t: &Tree) -> Run<Option<String>> {
    let children: Vec<Run<Option<String>>> = t.children.iter().map(|c| run_schema(g, c)).collect();
    let ok = children.iter().all(|c| c.state.is_some()) && horizontal_ok(g, t);
    Run {
        state: ok.then(|| format!("q_{}", t.key())),
        children,
    }
}

/// Whether A_s accepts: the root gets a state that is final (its key occurs in `root`).
pub fn accepts_schema(g: &Grammar, t: &Tree) -> bool {
    let Some(ctor) = g.keys.iter().position(|k| k.name == t.kind) else {
        return false;
    };
    run_schema(g, t).state.is_some()
        && g.root
            .atoms()
            .iter()
            .any(|a| a.ctor == ctor && matches(a, &t.values, &Binding::new()).is_some())
}

fn horizontal_ok(g: &Grammar, t: &Tree) -> bool {
    let Some(ctor) = g.keys.iter().position(|k| k.name == t.kind) else {
        return false;
    };
    let Some(p) = g.production(ctor) else {
        return false;
    };
    if p.params.len() != t.values.len() {
        return false;
    }
    let b: Binding = p
        .params
        .iter()
        .cloned()
        .zip(t.values.iter().cloned())
        .collect();
    let mut occs: HashMap<usize, &Template> = HashMap::new();
    p.rhs.visit(&mut |o, tm| {
        occs.insert(o, tm);
    });
    let nfa = Nfa::new(&p.rhs);
    let mut cur = nfa.closure(&[nfa.start]);
    for child in &t.children {
        let Some(cc) = g.keys.iter().position(|k| k.name == child.kind) else {
            return false;
        };
        let mut next = Vec::new();
        for &s in &cur {
            for &(occ, to) in &nfa.atom[s] {
                if occs
                    .get(&occ)
                    .is_some_and(|tm| tm.ctor == cc && matches(tm, &child.values, &b).is_some())
                {
                    next.push(to);
                }
            }
        }
        cur = nfa.closure(&next);
    }
    cur.contains(&nfa.accept)
}

/// Runs A_w bottom-up: a node gets `q_u` for every user u who may write it
/// and whose state all its children have (`q_u ← k(q_u*)`).
pub fn run_writes(g: &Grammar, d: &Domains, t: &Tree) -> Run<Vec<String>> {
    let children: Vec<Run<Vec<String>>> = t.children.iter().map(|c| run_writes(g, d, c)).collect();
    let ctor = g.keys.iter().position(|k| k.name == t.kind);
    let mut who = ctor.map_or_else(Vec::new, |c| writers(g, d, c, &t.values));
    who.retain(|u| children.iter().all(|c| c.state.contains(&format!("q_{u}"))));
    Run {
        state: who.into_iter().map(|u| format!("q_{u}")).collect(),
        children,
    }
}

impl Run<Vec<String>> {
    /// Whether A_w accepts (all its states are final): the root has a state.
    pub fn accepted(&self) -> bool {
        !self.state.is_empty()
    }
}
