//! The symbolic check: on key templates with variables, without enumerating
//! an alphabet (the paper's future work, infinite alphabets).
//!
//! With A_w deterministic, every key has at most one writer, so a tree is in
//! L(A_w) iff every node has a writer and all writers are equal; a tree is
//! connected, so that fails iff some node has no writer or some parent/child
//! pair has different writers. The check therefore (1) tests A_w for
//! nondeterminism by unifying every pair of update expressions, (2) computes
//! the reachable key *patterns* (templates up to renaming, finitely many)
//! from `root` through the children that can occur in a valid, finite tree,
//! and (3) looks at each reachable pattern and each parent/child edge with
//! the writer of a generic instance (all variables distinct and unlike any
//! constant), which has a writer iff every instance has, and whose writers
//! differ iff some instance's do.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::grammar::{Grammar, Template, Term};
use crate::limits::{Limits, Poll, Stop};

/// A term of a pattern: a constant or a numbered variable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum P {
    /// A constant.
    C(String),
    /// A variable.
    V(usize),
}

/// A key pattern: constructor and terms.
pub(crate) type Pattern = (usize, Vec<P>);

/// Which constructors can head a finite valid tree.
pub(crate) fn productive(g: &Grammar) -> Vec<bool> {
    levels(g).iter().map(Option::is_some).collect()
}

/// The height of the smallest tree under each productive constructor
/// (`None`: no finite tree). Level by level, like a breadth-first search:
/// a constructor is looked at again only when one of its children got a
/// level, so the work is about the size of the grammar, not its square.
pub(crate) fn levels(g: &Grammar) -> Vec<Option<usize>> {
    let n = g.keys.len();
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for c in 0..n {
        if let Some(p) = g.production(c) {
            let mut seen = HashSet::new();
            p.rhs.visit(&mut |_, t| {
                if seen.insert(t.ctor)
                    && let Some(v) = parents.get_mut(t.ctor)
                {
                    v.push(c);
                }
            });
        }
    }
    let mut lv: Vec<Option<usize>> = vec![None; n];
    let mut frontier: Vec<usize> = (0..n)
        .filter(|&c| g.production(c).is_some_and(|p| p.rhs.can(&|_| false)))
        .collect();
    for &c in &frontier {
        lv[c] = Some(1);
    }
    let mut k = 1;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        let mut looked = HashSet::new();
        for &c in &frontier {
            for &p in &parents[c] {
                if lv[p].is_some() || !looked.insert(p) {
                    continue;
                }
                let ok = g.production(p).is_some_and(|pr| {
                    pr.rhs
                        .can(&|t| lv.get(t.ctor).copied().flatten().is_some_and(|l| l <= k))
                });
                if ok {
                    next.push(p);
                }
            }
        }
        for &p in &next {
            lv[p] = Some(k + 1);
        }
        frontier = next;
        k += 1;
    }
    lv
}

/// Matches a write template against a pattern's generic instance; the writer's term.
pub(crate) fn writer_of(g: &Grammar, by_ctor: &[Vec<usize>], key: &Pattern) -> Option<(P, usize)> {
    for &wi in by_ctor.get(key.0).map_or(&[][..], Vec::as_slice) {
        let w = &g.writes[wi];
        let mut b: HashMap<&str, &P> = HashMap::new();
        let mut ok = true;
        for (a, t) in w.key.args.iter().zip(&key.1) {
            match (a, t) {
                (Term::Const(c), P::C(d)) if c == d => {}
                (Term::Const(_), _) => ok = false,
                (Term::Var(x), t) => match b.get(x.as_str()) {
                    Some(have) if *have != t => ok = false,
                    Some(_) => {}
                    None => {
                        b.insert(x, t);
                    }
                },
            }
        }
        if !ok {
            continue;
        }
        let who = match &w.writer {
            Term::Const(c) => P::C(c.clone()),
            Term::Var(x) => match b.get(x.as_str()) {
                Some(t) => (*t).clone(),
                // Any user writes it: A_w is nondeterministic, found by `ambiguity`.
                None => continue,
            },
        };
        return Some((who, wi));
    }
    None
}

/// A key two update expressions let two users write: the key, the two
/// writers, and the two expressions' indexes.
pub(crate) type Ambiguity = (Pattern, P, P, usize, usize);

/// Two update expressions that let two different users write one key: the
/// key (as a pattern), the two writers, and the expressions' indexes.
pub(crate) fn ambiguity(
    g: &Grammar,
    by_ctor: &[Vec<usize>],
    poll: &mut Poll<'_>,
) -> Result<Option<Ambiguity>, Stop> {
    // Only expressions of one constructor can unify: pairs within each group.
    let pairs = by_ctor.iter().flat_map(|ws| {
        ws.iter()
            .enumerate()
            .flat_map(move |(x, &i)| ws[x..].iter().map(move |&j| (i, j)))
    });
    for (i, j) in pairs {
        poll.tick()?;
        {
            let (a, b) = (&g.writes[i], &g.writes[j]);
            // Rename apart: variables of `a` are (0, name), of `b` (1, name).
            let mut u = Unifier::default();
            let ok = a
                .key
                .args
                .iter()
                .zip(&b.key.args)
                .all(|(x, y)| u.unify(&side(0, x), &side(1, y)));
            if !ok {
                continue;
            }
            let wa = u.find(&side(0, &a.writer));
            let wb = u.find(&side(1, &b.writer));
            if wa != wb {
                let mut names: HashMap<UTerm, usize> = HashMap::new();
                let mut num = |t: UTerm| -> P {
                    match t {
                        UTerm::C(c) => P::C(c),
                        v => {
                            let n = names.len();
                            P::V(*names.entry(v).or_insert(n))
                        }
                    }
                };
                let key: Vec<P> = a
                    .key
                    .args
                    .iter()
                    .map(|x| u.find(&side(0, x)))
                    .collect::<Vec<_>>()
                    .into_iter()
                    .map(&mut num)
                    .collect();
                let (pa, pb) = (num(wa), num(wb));
                return Ok(Some(((a.key.ctor, key), pa, pb, i, j)));
            }
        }
    }
    Ok(None)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum UTerm {
    C(String),
    V(u8, String),
}

fn side(s: u8, t: &Term) -> UTerm {
    match t {
        Term::Const(c) => UTerm::C(c.clone()),
        Term::Var(v) => UTerm::V(s, v.clone()),
    }
}

#[derive(Default)]
struct Unifier {
    parent: HashMap<UTerm, UTerm>,
}

impl Unifier {
    fn find(&self, t: &UTerm) -> UTerm {
        let mut t = t.clone();
        while let Some(p) = self.parent.get(&t) {
            t = p.clone();
        }
        t
    }
    fn unify(&mut self, a: &UTerm, b: &UTerm) -> bool {
        let (a, b) = (self.find(a), self.find(b));
        match (&a, &b) {
            _ if a == b => true,
            (UTerm::C(_), UTerm::C(_)) => false,
            (UTerm::C(_), _) => {
                self.parent.insert(b, a);
                true
            }
            _ => {
                self.parent.insert(a, b);
                true
            }
        }
    }
}

/// Renumbers variables in order of first appearance.
fn canon(p: &Pattern) -> Pattern {
    let mut map: HashMap<usize, usize> = HashMap::new();
    let terms =
        p.1.iter()
            .map(|t| match t {
                P::C(c) => P::C(c.clone()),
                P::V(v) => {
                    let n = map.len();
                    P::V(*map.entry(*v).or_insert(n))
                }
            })
            .collect();
    (p.0, terms)
}

/// The child pattern an atom gives under a parent pattern, in the joint
/// variable space (parent variables keep their numbers; the atom's own
/// variables get numbers from `next` on).
pub(crate) fn child_of(
    g: &Grammar,
    parent: &Pattern,
    atom: &Template,
    next: &mut usize,
    fresh: &mut HashMap<String, usize>,
) -> Pattern {
    let params = g
        .production(parent.0)
        .map(|p| p.params.clone())
        .unwrap_or_default();
    let args = atom
        .args
        .iter()
        .map(|a| match a {
            Term::Const(c) => P::C(c.clone()),
            Term::Var(x) => match params.iter().position(|p| p == x) {
                Some(i) => parent.1[i].clone(),
                None => P::V(*fresh.entry(x.clone()).or_insert_with(|| {
                    *next += 1;
                    *next - 1
                })),
            },
        })
        .collect();
    (atom.ctor, args)
}

fn max_var(p: &Pattern) -> usize {
    p.1.iter()
        .filter_map(|t| match t {
            P::V(v) => Some(v + 1),
            P::C(_) => None,
        })
        .max()
        .unwrap_or(0)
}

/// What the symbolic check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Finding {
    /// A_w is nondeterministic: one key, two writers, the two expressions.
    Ambiguous(Pattern, P, P, usize, usize),
    /// A reachable node nobody writes: the path of (pattern, occurrence) from the root.
    Unwritten(Vec<(Pattern, Option<usize>)>),
    /// A reachable edge whose ends have different writers: the path to the
    /// parent (in one joint variable space), the child's occurrence in the
    /// parent's production, and the writes covering parent and child.
    TwoWriters {
        path: Vec<(Pattern, Option<usize>)>,
        occ: usize,
        child: Pattern,
        parent_write: usize,
        child_write: usize,
    },
}

/// Runs the symbolic check; `None` means SAFE.
pub(crate) fn check(g: &Grammar) -> Option<Finding> {
    check_with(g, &Limits::none()).unwrap_or(None)
}

/// [`check`] that stops at `limits`.
pub(crate) fn check_with(g: &Grammar, limits: &Limits<'_>) -> Result<Option<Finding>, Stop> {
    let mut poll = Poll::new(limits);
    let by_ctor = g.writes_by_ctor();
    if let Some((k, a, b, i, j)) = ambiguity(g, &by_ctor, &mut poll)? {
        return Ok(Some(Finding::Ambiguous(k, a, b, i, j)));
    }
    let prod = productive(g);
    // Breadth-first over canonical patterns; `from` gives each its parent and occurrence.
    let mut seen: HashMap<Pattern, usize> = HashMap::new();
    let mut nodes: Vec<(Pattern, Option<(usize, usize)>)> = Vec::new();
    let mut queue = VecDeque::new();
    for t in g.root.atoms() {
        poll.tick()?;
        if !prod[t.ctor] {
            continue;
        }
        let p = canon(&free_pattern(t, &mut 0));
        if !seen.contains_key(&p) {
            seen.insert(p.clone(), nodes.len());
            nodes.push((p, None));
            queue.push_back(nodes.len() - 1);
        }
    }
    while let Some(n) = queue.pop_front() {
        poll.tick()?;
        let parent = nodes[n].0.clone();
        let Some((pw, pwi)) = writer_of(g, &by_ctor, &parent) else {
            return Ok(Some(Finding::Unwritten(path_to(g, &nodes, n))));
        };
        let Some(prodn) = g.production(parent.0) else {
            continue;
        };
        for (occ, atom) in prodn.rhs.live_atoms(&|t| prod[t.ctor]) {
            let mut next = max_var(&parent);
            let child = child_of(g, &parent, atom, &mut next, &mut HashMap::new());
            if let Some((cw, cwi)) = writer_of(g, &by_ctor, &child)
                && cw != pw
            {
                let path = path_to(g, &nodes, n);
                let last = path
                    .last()
                    .map(|(p, _)| p.clone())
                    .unwrap_or(parent.clone());
                let mut next = max_var_path(&path);
                let child = child_of(g, &last, atom, &mut next, &mut HashMap::new());
                return Ok(Some(Finding::TwoWriters {
                    path,
                    occ,
                    child,
                    parent_write: pwi,
                    child_write: cwi,
                }));
            }
            let c = canon(&child);
            if !seen.contains_key(&c) {
                seen.insert(c.clone(), nodes.len());
                nodes.push((c, Some((n, occ))));
                queue.push_back(nodes.len() - 1);
            }
        }
    }
    Ok(None)
}

/// A template with every variable free (a `root` atom), numbered from `next`.
pub(crate) fn free_pattern(t: &Template, next: &mut usize) -> Pattern {
    let mut fresh: HashMap<&str, usize> = HashMap::new();
    let args = t
        .args
        .iter()
        .map(|a| match a {
            Term::Const(c) => P::C(c.clone()),
            Term::Var(x) => P::V(*fresh.entry(x).or_insert_with(|| {
                *next += 1;
                *next - 1
            })),
        })
        .collect();
    (t.ctor, args)
}

fn max_var_path(path: &[(Pattern, Option<usize>)]) -> usize {
    path.iter().map(|(p, _)| max_var(p)).max().unwrap_or(0)
}

/// The path from a root pattern to node `n`, re-derived in one joint
/// variable space so that shared values stay shared.
fn path_to(
    g: &Grammar,
    nodes: &[(Pattern, Option<(usize, usize)>)],
    n: usize,
) -> Vec<(Pattern, Option<usize>)> {
    let mut chain = vec![n];
    let mut cur = n;
    while let Some((p, _)) = nodes[cur].1 {
        chain.push(p);
        cur = p;
    }
    chain.reverse();
    let mut out: Vec<(Pattern, Option<usize>)> = Vec::new();
    let mut next = 0;
    for &i in &chain {
        let p = match (out.last(), nodes[i].1) {
            (Some((parent, _)), Some((_, occ))) => {
                let atom = atom_at(g, parent.0, occ);
                match atom {
                    Some(a) => child_of(g, parent, &a, &mut next, &mut HashMap::new()),
                    None => nodes[i].0.clone(),
                }
            }
            _ => {
                let p = nodes[i].0.clone();
                next = max_var(&p);
                p
            }
        };
        out.push((p, nodes[i].1.map(|(_, o)| o)));
    }
    out
}

/// The atom with occurrence number `occ` in a constructor's production.
pub(crate) fn atom_at(g: &Grammar, ctor: usize, occ: usize) -> Option<Template> {
    let mut found = None;
    if let Some(p) = g.production(ctor) {
        p.rhs.visit(&mut |o, t| {
            if o == occ {
                found = Some(t.clone());
            }
        });
    }
    found
}
