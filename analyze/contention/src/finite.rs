//! The paper's algorithm on a finite alphabet: the key templates are
//! instantiated over finite sets of values per sort, giving the alphabet Σ;
//! from them the hedge automata A_s (one state q_σ per key σ) and A_w (one
//! state q_u per user), the nondeterminism test of A_w, and the containment
//! L(A_s) ⊆ L(A_w) by the standard product construction: bottom-up, the
//! reachable pairs (q_σ, S) where S is the set of A_w states the same tree
//! can reach. L(A_s) ⊄ L(A_w) iff a pair (q_φ, ∅) is reachable with q_φ final.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::grammar::{Grammar, Template, Term, USER_SORT, show_key};
use crate::limits::{Limits, Poll, Stop};
use crate::nfa::Nfa;
use crate::product::{Binding, Found, Reach, Walk, add_found, first_unwritable, matches};

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
            let taken: HashSet<&str> = c.iter().map(String::as_str).collect();
            let mut vals = c.clone();
            let declared: Vec<String> = g.domains.get(&sort).cloned().unwrap_or_default();
            let mut used: HashSet<String> = declared.iter().cloned().collect();
            let mut fresh_names: Vec<String> = declared
                .into_iter()
                .filter(|v| !taken.contains(v.as_str()))
                .take(fresh)
                .collect();
            let prefix = if sort == USER_SORT {
                "user"
            } else {
                sort.as_str()
            };
            let mut n = 1;
            while fresh_names.len() < fresh {
                let name = format!("{prefix}{n}");
                n += 1;
                if !taken.contains(name.as_str()) && used.insert(name.clone()) {
                    fresh_names.push(name);
                }
            }
            vals.extend(fresh_names);
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
        size_of(g, |s| self.0.get(s).map_or(0, Vec::len))
    }

    /// The alphabet size and the number of users `Domains::new(g, fresh)`
    /// would give, without building them (a huge grammar is refused cheaply).
    pub fn estimate(g: &Grammar, fresh: usize) -> (usize, usize) {
        let consts = g.constants();
        let count = |s: &str| consts.get(s).map_or(0, Vec::len).saturating_add(fresh);
        (size_of(g, count), count(USER_SORT))
    }
}

/// Σ over the keys of the product of their sorts' value counts (saturating).
fn size_of(g: &Grammar, count: impl Fn(&str) -> usize) -> usize {
    g.keys
        .iter()
        .map(|k| {
            k.sorts
                .iter()
                .map(|s| count(s))
                .fold(1usize, usize::saturating_mul)
        })
        .fold(0usize, usize::saturating_add)
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
    /// The children are not shown: the tree is deeper or larger than
    /// [`MAX_TREE_DEPTH`] / [`MAX_TREE_NODES`] allow, and this node's smallest
    /// valid subtree goes on below. A cut tree is not itself a valid group.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
}

impl Tree {
    /// A node.
    pub fn node(kind: &str, values: &[&str], children: Vec<Tree>) -> Tree {
        Tree {
            kind: kind.to_owned(),
            values: values.iter().map(|v| (*v).to_owned()).collect(),
            children,
            cut: false,
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

/// The users who may write a key (A_w's rules `q_u ← k(q_u*)` for this label).
pub fn writers(g: &Grammar, d: &Domains, ctor: usize, values: &[String]) -> Vec<String> {
    let all: Vec<usize> = (0..g.writes.len())
        .filter(|&i| g.writes[i].key.ctor == ctor)
        .collect();
    writers_among(g, d, &all, values)
}

/// [`writers`] over the given update expressions (those of the key's constructor).
pub(crate) fn writers_among(
    g: &Grammar,
    d: &Domains,
    writes: &[usize],
    values: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in writes.iter().filter_map(|&i| g.writes.get(i)) {
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

/// The distinct A_w state sets of the children an atom stands for, each with one child that has it.
type Letters = Vec<(u128, usize)>;

/// The most users the finite check handles (one bit each).
pub const MAX_USERS: usize = 128;

/// A template argument, compiled against the domains: a value (a constant),
/// the parent's i-th parameter, or the k-th free variable of the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arg {
    Fixed(usize),
    Param(usize),
    Free(usize),
}

/// A template compiled to value indexes: matching is index comparison, with
/// no map copied per call.
#[derive(Debug, Clone)]
struct Compiled {
    ctor: usize,
    args: Vec<Arg>,
    /// The sort of each free variable.
    free_sorts: Vec<usize>,
    /// False when a constant is not in its sort's domain (matches nothing).
    possible: bool,
}

/// The instantiated alphabet Σ: the keys of constructor `c` are the indexes
/// `base[c] ..` in row-major order of their value indexes.
struct Sigma<'d> {
    base: Vec<usize>,
    /// The sort of each argument, per constructor.
    sorts: Vec<Vec<usize>>,
    /// The values of each sort.
    vals: Vec<&'d [String]>,
    /// The index of each value, per sort.
    index: Vec<HashMap<&'d str, usize>>,
    len: usize,
}

impl<'d> Sigma<'d> {
    fn new(g: &Grammar, d: &'d Domains) -> Sigma<'d> {
        let sort_names = g.sorts();
        let sort_of: HashMap<&str, usize> = sort_names
            .iter()
            .enumerate()
            .map(|(i, s)| (s.as_str(), i))
            .collect();
        let vals: Vec<&[String]> = sort_names
            .iter()
            .map(|s| d.0.get(s).map_or(&[][..], Vec::as_slice))
            .collect();
        let index = vals
            .iter()
            .map(|vs| {
                vs.iter()
                    .enumerate()
                    .map(|(i, v)| (v.as_str(), i))
                    .collect()
            })
            .collect();
        let mut base = Vec::with_capacity(g.keys.len());
        let mut sorts = Vec::with_capacity(g.keys.len());
        let mut len = 0usize;
        for k in &g.keys {
            base.push(len);
            let ss: Vec<usize> = k
                .sorts
                .iter()
                .map(|s| sort_of.get(s.as_str()).copied().unwrap_or(0))
                .collect();
            len = len.saturating_add(
                ss.iter()
                    .map(|&s| vals[s].len())
                    .fold(1usize, usize::saturating_mul),
            );
            sorts.push(ss);
        }
        Sigma {
            base,
            sorts,
            vals,
            index,
            len,
        }
    }

    /// The constructor of key `i`.
    fn ctor_of(&self, i: usize) -> usize {
        self.base.partition_point(|&b| b <= i).saturating_sub(1)
    }

    /// The keys of constructor `c`.
    fn keys_of(&self, c: usize) -> std::ops::Range<usize> {
        let end = self.base.get(c + 1).copied().unwrap_or(self.len);
        self.base[c]..end
    }

    /// The value indexes of key `i` of constructor `c`.
    fn decode(&self, c: usize, i: usize) -> Vec<usize> {
        let mut rest = i - self.base[c];
        let mut out = vec![0; self.sorts[c].len()];
        for (j, &s) in self.sorts[c].iter().enumerate().rev() {
            let n = self.vals[s].len().max(1);
            out[j] = rest % n;
            rest /= n;
        }
        out
    }

    fn encode(&self, c: usize, v: &[usize]) -> usize {
        let mut i = 0;
        for (j, &s) in self.sorts[c].iter().enumerate() {
            i = i * self.vals[s].len() + v[j];
        }
        self.base[c] + i
    }

    fn values(&self, c: usize, v: &[usize]) -> Vec<String> {
        v.iter()
            .zip(&self.sorts[c])
            .map(|(&x, &s)| self.vals[s][x].clone())
            .collect()
    }

    /// Compiles a template whose variables in `params` are the parent's.
    fn compile(&self, t: &Template, params: &[String]) -> Compiled {
        let mut free: Vec<&str> = Vec::new();
        let mut free_sorts = Vec::new();
        let mut possible = true;
        let args = t
            .args
            .iter()
            .enumerate()
            .map(|(j, a)| {
                let sort = self.sorts[t.ctor][j];
                match a {
                    Term::Const(c) => match self.index[sort].get(c.as_str()) {
                        Some(&v) => Arg::Fixed(v),
                        None => {
                            possible = false;
                            Arg::Fixed(0)
                        }
                    },
                    Term::Var(x) => match params.iter().position(|p| p == x) {
                        Some(i) => Arg::Param(i),
                        None => match free.iter().position(|f| f == x) {
                            Some(k) => Arg::Free(k),
                            None => {
                                free.push(x);
                                free_sorts.push(sort);
                                Arg::Free(free.len() - 1)
                            }
                        },
                    },
                }
            })
            .collect();
        Compiled {
            ctor: t.ctor,
            args,
            free_sorts,
            possible,
        }
    }

    /// Calls `f` with every key matching `t` under parent values `parent`.
    fn each_match(&self, t: &Compiled, parent: &[usize], mut f: impl FnMut(usize)) -> Option<()> {
        if !t.possible || self.sorts[t.ctor].iter().any(|&s| self.vals[s].is_empty()) {
            return Some(());
        }
        let dims: Vec<usize> = t.free_sorts.iter().map(|&s| self.vals[s].len()).collect();
        let mut free = vec![0usize; dims.len()];
        let mut key = vec![0usize; t.args.len()];
        loop {
            for (j, a) in t.args.iter().enumerate() {
                key[j] = match *a {
                    Arg::Fixed(v) => v,
                    Arg::Param(i) => *parent.get(i)?,
                    Arg::Free(k) => free[k],
                };
            }
            f(self.encode(t.ctor, &key));
            // The next assignment of the free variables (an odometer).
            let mut k = 0;
            loop {
                if k == dims.len() {
                    return Some(());
                }
                free[k] += 1;
                if free[k] < dims[k] {
                    break;
                }
                free[k] = 0;
                k += 1;
            }
        }
    }

    /// The writers (user value indexes) of key `v` of constructor `c`.
    fn writers(&self, g: &Grammar, writes: &[(Compiled, Writer)], v: &[usize]) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        let mut bound: Vec<Option<usize>> = Vec::new();
        for (t, who) in writes {
            if !t.possible {
                continue;
            }
            bound.clear();
            bound.resize(t.free_sorts.len(), None);
            let ok = t.args.iter().zip(v).all(|(a, &x)| match *a {
                Arg::Fixed(f) => f == x,
                Arg::Param(_) => true,
                Arg::Free(k) => match bound[k] {
                    Some(have) => have == x,
                    None => {
                        bound[k] = Some(x);
                        true
                    }
                },
            });
            if !ok {
                continue;
            }
            let mut add = |u: usize| {
                if !out.contains(&u) {
                    out.push(u);
                }
            };
            match who {
                Writer::User(u) => add(*u),
                Writer::Slot(k) => {
                    if let Some(Some(u)) = bound.get(*k) {
                        add(*u);
                    }
                }
                Writer::Any => (0..self.vals[0].len()).for_each(add),
            }
        }
        let _ = g;
        out
    }
}

/// The writer of a compiled update expression.
#[derive(Debug, Clone, Copy)]
enum Writer {
    /// A user value (a constant writer).
    User(usize),
    /// The value of a free variable of the key.
    Slot(usize),
    /// Any user (the writer is not in the key).
    Any,
}

/// Runs the paper's algorithm over the given domains (at most [`MAX_USERS`] users).
pub fn check(g: &Grammar, d: &Domains) -> FiniteResult {
    match check_with(g, d, &Limits::none()) {
        Ok(r) => r,
        Err(_) => FiniteResult {
            alphabet: 0,
            ambiguous: None,
            contained: None,
            counterexample: None,
        },
    }
}

/// [`check`] that stops at `limits`.
///
/// # Errors
/// [`Stop`] when cancelled or past the deadline.
pub fn check_with(g: &Grammar, d: &Domains, limits: &Limits<'_>) -> Result<FiniteResult, Stop> {
    let mut poll = Poll::new(limits);
    let sigma = Sigma::new(g, d);
    let alphabet = sigma.len;
    // The user sort is sort 0 (`Grammar::sorts` puts it first).
    let users = sigma.vals[0].len().min(MAX_USERS);
    let by_ctor = g.writes_by_ctor();
    let writes: Vec<Vec<(Compiled, Writer)>> = by_ctor
        .iter()
        .map(|ws| {
            ws.iter()
                .map(|&i| {
                    let w = &g.writes[i];
                    let t = sigma.compile(&w.key, &[]);
                    let who = match &w.writer {
                        Term::Const(c) => sigma.index[0]
                            .get(c.as_str())
                            .map_or(Writer::Any, |&u| Writer::User(u)),
                        Term::Var(x) => {
                            let mut slot = None;
                            for (a, arg) in w.key.args.iter().zip(&t.args) {
                                if let (Term::Var(y), Arg::Free(k)) = (a, arg)
                                    && y == x
                                {
                                    slot = Some(*k);
                                }
                            }
                            slot.map_or(Writer::Any, Writer::Slot)
                        }
                    };
                    (t, who)
                })
                .collect()
        })
        .collect();
    // A_w: the writers of each key, as a bit set over the first MAX_USERS users.
    let mut wmask = Vec::with_capacity(alphabet);
    let mut ambiguous = None;
    for (c, ws) in writes.iter().enumerate() {
        for s in sigma.keys_of(c) {
            poll.tick()?;
            let v = sigma.decode(c, s);
            let who = sigma.writers(g, ws, &v);
            if who.len() > 1 && ambiguous.is_none() {
                ambiguous = Some((
                    show_values(g.name(c), &sigma.values(c, &v)),
                    who.iter().map(|&u| sigma.vals[0][u].clone()).collect(),
                ));
            }
            let mut m = 0u128;
            for &u in &who {
                if u < users {
                    m |= 1 << u;
                }
            }
            wmask.push(m);
        }
    }
    if ambiguous.is_some() {
        return Ok(FiniteResult {
            alphabet,
            ambiguous,
            contained: None,
            counterexample: None,
        });
    }
    // A_s: each production's horizontal NFA with its ε-closures, and each
    // atom occurrence compiled against the production's parameters.
    let nfas: Vec<Option<(Nfa, Vec<Vec<usize>>)>> = (0..g.keys.len())
        .map(|c| {
            g.production(c).map(|p| {
                let nfa = Nfa::new(&p.rhs);
                let closures = (0..nfa.atom.len()).map(|s| nfa.closure(&[s])).collect();
                (nfa, closures)
            })
        })
        .collect();
    let mut atoms: HashMap<usize, Compiled> = HashMap::new();
    for p in g.productions.iter().flatten() {
        p.rhs.visit(&mut |occ, t| {
            atoms.insert(occ, sigma.compile(t, &p.params));
        });
    }
    let order = children_first(g);
    // The product: reachable (σ, S) pairs with the children that first gave
    // them, round after round (children first) until nothing changes.
    let mut reach: Reach = vec![Vec::new(); alphabet];
    loop {
        let mut changed = false;
        // Per occurrence and parent values used: the distinct A_w sets of the
        // matching children, each with one child that has it.
        let mut memo: HashMap<(usize, Vec<usize>), Letters> = HashMap::new();
        for &c in &order {
            let Some((nfa, closures)) = &nfas[c] else {
                continue;
            };
            for s in sigma.keys_of(c) {
                poll.tick()?;
                let v = sigma.decode(c, s);
                let found = explore(
                    (nfa, closures),
                    &mut |occ| {
                        let Some(t) = atoms.get(&occ) else {
                            return Vec::new();
                        };
                        let proj: Vec<usize> = t
                            .args
                            .iter()
                            .filter_map(|a| match a {
                                Arg::Param(i) => v.get(*i).copied(),
                                _ => None,
                            })
                            .collect();
                        memo.entry((occ, proj))
                            .or_insert_with(|| {
                                let mut out: Vec<(u128, usize)> = Vec::new();
                                sigma.each_match(t, &v, |tau| {
                                    for (m, _) in &reach[tau] {
                                        if !out.iter().any(|(x, _)| x == m) {
                                            out.push((*m, tau));
                                        }
                                    }
                                });
                                out
                            })
                            .clone()
                    },
                    wmask[s],
                );
                changed |= add_found(&mut reach[s], found);
            }
        }
        if !changed {
            break;
        }
    }
    // Final states: q_φ for every key φ matching an atom of `root`.
    let mut roots: Vec<usize> = Vec::new();
    for t in g.root.atoms() {
        let t = sigma.compile(t, &[]);
        sigma.each_match(&t, &[], |i| roots.push(i));
    }
    roots.sort_unstable();
    roots.dedup();
    let bad = first_unwritable(&roots, &reach);
    let counterexample = bad.map(|r| {
        let mut budget = MAX_TREE_NODES;
        build_tree(g, &sigma, &reach, (r, 0), 0, &mut budget)
    });
    Ok(FiniteResult {
        alphabet,
        ambiguous: None,
        contained: Some(bad.is_none()),
        counterexample,
    })
}

/// The constructors, children before parents where the grammar allows
/// (a depth-first post-order, without recursion), so that one round of the
/// product construction sees most children's sets before their parents.
fn children_first(g: &Grammar) -> Vec<usize> {
    let n = g.keys.len();
    let kids: Vec<Vec<usize>> = (0..n)
        .map(|c| {
            let mut v: Vec<usize> = Vec::new();
            if let Some(p) = g.production(c) {
                p.rhs.visit(&mut |_, t| v.push(t.ctor));
            }
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut state = vec![0u8; n];
    let mut out = Vec::with_capacity(n);
    for start in 0..n {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some((c, i)) = stack.pop() {
            if let Some(&k) = kids[c].get(i) {
                stack.push((c, i + 1));
                if state[k] == 0 {
                    state[k] = 1;
                    stack.push((k, 0));
                }
            } else {
                state[c] = 2;
                out.push(c);
            }
        }
    }
    out
}

/// All A_w state sets a node σ can get, with a child sequence giving each:
/// a breadth-first walk over (NFA state, running intersection). `letters`
/// gives, for an atom occurrence, the distinct sets of the children it stands for.
fn explore(
    (nfa, closures): (&Nfa, &[Vec<usize>]),
    letters: &mut impl FnMut(usize) -> Vec<(u128, usize)>,
    start_mask: u128,
) -> Found {
    let closure = |s: usize| closures.get(s).map_or(&[][..], Vec::as_slice);
    let mut walk = Walk::default();
    for &s in closure(nfa.start) {
        walk.visit(s, start_mask, None);
    }
    let mut cache: HashMap<usize, Vec<(u128, usize)>> = HashMap::new();
    while let Some((n, state, mask)) = walk.next_node() {
        for &(occ, to) in &nfa.atom[state] {
            let kids = cache.entry(occ).or_insert_with(|| letters(occ));
            for &(m, tau) in kids.iter() {
                for &t in closure(to) {
                    walk.visit(t, mask & m, Some((n, (tau, m))));
                }
            }
        }
    }
    walk.accepted(nfa.accept)
}

/// The deepest a printed tree goes; below, a node is marked [`Tree::cut`].
pub const MAX_TREE_DEPTH: usize = 64;
/// The most nodes a printed tree has; past them, nodes are marked [`Tree::cut`].
pub const MAX_TREE_NODES: usize = 2_000;

fn build_tree(
    g: &Grammar,
    sigma: &Sigma<'_>,
    reach: &Reach,
    (s, mask): (usize, u128),
    depth: usize,
    budget: &mut usize,
) -> Tree {
    let c = sigma.ctor_of(s);
    let vals = sigma.values(c, &sigma.decode(c, s));
    *budget = budget.saturating_sub(1);
    let kids = reach[s]
        .iter()
        .find(|(m, _)| *m == mask)
        .map(|(_, k)| k.clone())
        .unwrap_or_default();
    let cut = !kids.is_empty() && (depth + 1 >= MAX_TREE_DEPTH || *budget < kids.len());
    Tree {
        kind: g.name(c).to_owned(),
        values: vals,
        children: if cut {
            Vec::new()
        } else {
            kids.into_iter()
                .map(|k| build_tree(g, sigma, reach, k, depth + 1, budget))
                .collect()
        },
        cut,
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
