//! Witnesses: a concrete entity-group tree in L(A_s) \ L(A_w), the users who
//! write it, and the productions and update expressions responsible.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::finite::{Domains, Tree, writers};
use crate::grammar::{Grammar, Regex, Template, USER_SORT};
use crate::symbolic::{Finding, P, Pattern, atom_at, child_of, levels};

/// Why the schema is unsafe, with a concrete example.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Witness {
    /// `two-writers`, `unwritten` or `ambiguous-write`.
    pub kind: String,
    /// One sentence.
    pub summary: String,
    /// The entity group (for `ambiguous-write`, absent).
    pub tree: Option<Tree>,
    /// The key at the heart of it (the contended child, the unwritten node, the ambiguous key).
    pub key: String,
    /// The users who write it (two for `two-writers` and `ambiguous-write`).
    pub users: Vec<String>,
    /// The productions and update expressions responsible.
    pub responsible: Vec<Responsible>,
    /// Whether `tree` is a whole valid entity group. False when it had to be
    /// cut to stay printable (a mandatory chain deeper than
    /// [`MAX_TREE_DEPTH`](crate::finite::MAX_TREE_DEPTH), more than
    /// [`MAX_TREE_NODES`](crate::finite::MAX_TREE_NODES) nodes, or a path
    /// from the root longer than [`MAX_PATH`]): `notes` says where.
    pub complete: bool,
    /// Where the tree was cut.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The most levels of the path from the group's root to the contended node
/// that a witness shows; a longer path is shown from below, with a note.
pub const MAX_PATH: usize = 32;

/// The deepest the smallest subtree under one node of the path is shown.
const MAX_SUBTREE_DEPTH: usize = 24;

/// A line of the input that makes the schema unsafe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Responsible {
    /// Its line number.
    pub line: u32,
    /// The production or update expression, as text.
    pub text: String,
}

/// A tree over patterns, before naming.
struct STree {
    pat: Pattern,
    children: Vec<STree>,
    /// The children are left out (the tree would be too deep or too large).
    cut: bool,
}

impl STree {
    fn leaf(pat: Pattern) -> STree {
        STree {
            pat,
            children: Vec::new(),
            cut: false,
        }
    }
}

struct Builder<'g> {
    g: &'g Grammar,
    by_ctor: Vec<Vec<usize>>,
    prod: Vec<bool>,
    level: Vec<Option<usize>>,
    next: usize,
    /// Nodes the tree may still get.
    budget: usize,
    /// Whether some node was cut.
    cut: bool,
}

impl Builder<'_> {
    /// The smallest valid subtree under a pattern, cut below
    /// [`MAX_SUBTREE_DEPTH`] levels or when the node budget runs out.
    fn min_tree(&mut self, pat: Pattern, depth: usize) -> STree {
        self.budget = self.budget.saturating_sub(1);
        let lv = self.level[pat.0].unwrap_or(1);
        let word = match self.g.production(pat.0) {
            Some(p) => min_word(&p.rhs, &|t: &Template| {
                self.level[t.ctor].is_some_and(|l| l < lv)
            }),
            None => Vec::new(),
        };
        if !word.is_empty() && (depth >= MAX_SUBTREE_DEPTH || self.budget < word.len()) {
            self.cut = true;
            return STree {
                pat,
                children: Vec::new(),
                cut: true,
            };
        }
        let mut children = Vec::new();
        for atom in word {
            let c = child_of(self.g, &pat, &atom, &mut self.next, &mut HashMap::new());
            children.push(self.min_tree(c, depth + 1));
        }
        STree {
            pat,
            children,
            cut: false,
        }
    }

    /// The children of `pat` for a word containing occurrence `occ` (twice if
    /// `two` and it is under a star): `None` marks where the target goes.
    fn around(&mut self, pat: &Pattern, occ: usize, two: bool) -> Vec<Option<STree>> {
        let Some(p) = self.g.production(pat.0) else {
            return vec![None];
        };
        let items = word_with(&p.rhs, occ, two, &|t: &Template| self.prod[t.ctor]);
        items
            .into_iter()
            .map(|it| {
                it.map(|atom| {
                    let c = child_of(self.g, pat, &atom, &mut self.next, &mut HashMap::new());
                    self.min_tree(c, 0)
                })
            })
            .collect()
    }
}

fn contains(r: &Regex, occ: usize) -> bool {
    let mut f = false;
    r.visit(&mut |o, _| f |= o == occ);
    f
}

fn min_word(r: &Regex, ok: &impl Fn(&Template) -> bool) -> Vec<Template> {
    match r {
        Regex::Eps | Regex::Star(_) | Regex::Opt(_) => Vec::new(),
        Regex::Atom(_, t) => vec![t.clone()],
        Regex::Seq(v) => v.iter().flat_map(|r| min_word(r, ok)).collect(),
        Regex::Alt(v) => v
            .iter()
            .find(|r| r.can(ok))
            .map(|r| min_word(r, ok))
            .unwrap_or_default(),
        Regex::Plus(r) => min_word(r, ok),
    }
}

/// A word containing occurrence `occ`: `None` for it, `Some(atom)` for fillers.
fn word_with(
    r: &Regex,
    occ: usize,
    two: bool,
    ok: &impl Fn(&Template) -> bool,
) -> Vec<Option<Template>> {
    match r {
        Regex::Eps => Vec::new(),
        Regex::Atom(o, t) => {
            if *o == occ {
                vec![None]
            } else {
                vec![Some(t.clone())]
            }
        }
        Regex::Seq(v) => v
            .iter()
            .flat_map(|p| {
                if contains(p, occ) {
                    word_with(p, occ, two, ok)
                } else {
                    min_word(p, ok).into_iter().map(Some).collect()
                }
            })
            .collect(),
        Regex::Alt(v) => v
            .iter()
            .find(|p| contains(p, occ))
            .map(|p| word_with(p, occ, two, ok))
            .unwrap_or_default(),
        Regex::Star(p) | Regex::Plus(p) => {
            let once = word_with(p, occ, false, ok);
            if two {
                let mut w = once.clone();
                w.extend(word_with(p, occ, false, ok));
                w
            } else {
                once
            }
        }
        Regex::Opt(p) => word_with(p, occ, two, ok),
    }
}

/// Gives variables names: shared ones from the front of each sort's names,
/// contenders (the users that make the conflict) from the back, so that the
/// paper's five users give Alice's article commented on by Dave and Eve.
struct Namer {
    sorts: HashMap<usize, String>,
    names: BTreeMap<String, Vec<String>>,
}

impl Namer {
    fn new(g: &Grammar) -> Namer {
        let d = Domains::new(g, 0);
        let mut names = BTreeMap::new();
        for sort in g.sorts() {
            let consts = d.0.get(&sort).cloned().unwrap_or_default();
            let declared: Vec<String> = g
                .domains
                .get(&sort)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|v| !consts.contains(v))
                .collect();
            names.insert(sort, declared);
        }
        Namer {
            sorts: HashMap::new(),
            names,
        }
    }

    fn note(&mut self, g: &Grammar, p: &Pattern) {
        for (i, t) in p.1.iter().enumerate() {
            if let P::V(v) = t {
                self.sorts.insert(*v, g.keys[p.0].sorts[i].clone());
            }
        }
    }

    fn assign(&mut self, order: &[usize], contenders: &[usize]) -> HashMap<usize, String> {
        let mut out = HashMap::new();
        let mut by_sort: BTreeMap<String, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
        for v in order {
            let s = self
                .sorts
                .get(v)
                .cloned()
                .unwrap_or_else(|| USER_SORT.into());
            let e = by_sort.entry(s).or_default();
            if contenders.contains(v) {
                if !e.1.contains(v) {
                    e.1.push(*v);
                }
            } else if !e.0.contains(v) {
                e.0.push(*v);
            }
        }
        for (sort, (front, back)) in by_sort {
            let names = self.names.entry(sort.clone()).or_default();
            let prefix = if sort == USER_SORT {
                "user".to_owned()
            } else {
                sort.clone()
            };
            let mut n = 1;
            while names.len() < front.len() + back.len() {
                let name = format!("{prefix}{n}");
                n += 1;
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            for (i, v) in front.iter().enumerate() {
                out.insert(*v, names[i].clone());
            }
            let start = names.len() - back.len();
            for (i, v) in back.iter().enumerate() {
                out.insert(*v, names[start + i].clone());
            }
        }
        out
    }
}

fn vars_in_order(t: &STree, out: &mut Vec<usize>) {
    for p in &t.pat.1 {
        if let P::V(v) = p
            && !out.contains(v)
        {
            out.push(*v);
        }
    }
    for c in &t.children {
        vars_in_order(c, out);
    }
}

fn note_all(n: &mut Namer, g: &Grammar, t: &STree) {
    n.note(g, &t.pat);
    for c in &t.children {
        note_all(n, g, c);
    }
}

fn name_term(t: &P, names: &HashMap<usize, String>) -> String {
    match t {
        P::C(c) => c.clone(),
        P::V(v) => names.get(v).cloned().unwrap_or_else(|| format!("x{v}")),
    }
}

fn to_tree(g: &Grammar, t: &STree, names: &HashMap<usize, String>) -> Tree {
    Tree {
        kind: g.name(t.pat.0).to_owned(),
        values: t.pat.1.iter().map(|p| name_term(p, names)).collect(),
        children: t.children.iter().map(|c| to_tree(g, c, names)).collect(),
        cut: t.cut,
    }
}

fn line_of_production(g: &Grammar, ctor: usize) -> Responsible {
    match g.production(ctor) {
        Some(p) => {
            let lhs = crate::grammar::show_key(
                g.name(ctor),
                &p.params
                    .iter()
                    .cloned()
                    .map(crate::grammar::Term::Var)
                    .collect::<Vec<_>>(),
            );
            Responsible {
                line: p.span.line,
                text: format!("{lhs} ::= {}", g.show_regex(&p.rhs)),
            }
        }
        None => Responsible {
            line: 0,
            text: g.name(ctor).to_owned(),
        },
    }
}

fn line_of_write(g: &Grammar, w: usize) -> Responsible {
    Responsible {
        line: g.writes[w].span.line,
        text: g.show_write(&g.writes[w]),
    }
}

/// Builds the witness of a finding.
pub(crate) fn build(g: &Grammar, f: &Finding) -> Witness {
    let level = levels(g);
    let mut b = Builder {
        g,
        by_ctor: g.writes_by_ctor(),
        prod: level.iter().map(Option::is_some).collect(),
        level,
        next: 0,
        budget: crate::finite::MAX_TREE_NODES,
        cut: false,
    };
    let mut namer = Namer::new(g);
    match f {
        Finding::Ambiguous(key, wa, wb, i, j) => ambiguous(g, &mut namer, key, (wa, wb), (*i, *j)),
        Finding::Unwritten(path) => unwritten(&mut b, &mut namer, path),
        Finding::TwoWriters {
            path,
            occ,
            child,
            parent_write,
            child_write,
        } => two_writers(
            &mut b,
            &mut namer,
            (path, *occ, child),
            (*parent_write, *child_write),
        ),
    }
}

/// The witness of an ambiguous write: one key, the writers `wa` and `wb`, by
/// the writes `i` and `j`.
fn ambiguous(
    g: &Grammar,
    namer: &mut Namer,
    key: &Pattern,
    (wa, wb): (&P, &P),
    (i, j): (usize, usize),
) -> Witness {
    namer.note(g, key);
    let mut order: Vec<usize> = key
        .1
        .iter()
        .filter_map(|p| if let P::V(v) = p { Some(*v) } else { None })
        .collect();
    let mut contenders = Vec::new();
    for w in [wa, wb] {
        if let P::V(v) = w {
            namer.sorts.insert(*v, USER_SORT.into());
            if !order.contains(v) {
                order.push(*v);
                contenders.push(*v);
            }
        }
    }
    let names = namer.assign(&order, &contenders);
    let keytext = to_tree(g, &STree::leaf(key.clone()), &names).key();
    let users = vec![name_term(wa, &names), name_term(wb, &names)];
    let mut responsible = vec![line_of_write(g, i)];
    if i != j {
        responsible.push(line_of_write(g, j));
    }
    Witness {
        kind: "ambiguous-write".into(),
        summary: format!(
            "A_w is nondeterministic: {keytext} can be written by {} and by {} (the key does not determine its writer)",
            users[0], users[1]
        ),
        tree: None,
        key: keytext,
        users,
        responsible,
        complete: true,
        notes: Vec::new(),
    }
}

/// The witness of a reachable node nobody writes, at the end of `path`.
fn unwritten(b: &mut Builder<'_>, namer: &mut Namer, path: &[(Pattern, Option<usize>)]) -> Witness {
    let g = b.g;
    let mut notes = Vec::new();
    let path = elide(g, path, &mut notes);
    b.next = path.iter().map(|(p, _)| max_var(p)).max().unwrap_or(0);
    let tree = complete_path(b, path, None);
    note_all(namer, g, &tree);
    let mut order = Vec::new();
    vars_in_order(&tree, &mut order);
    let names = namer.assign(&order, &[]);
    let last = path
        .last()
        .map(|(p, _)| p.clone())
        .unwrap_or((0, Vec::new()));
    let key = to_tree(g, &STree::leaf(last.clone()), &names).key();
    let mut responsible: Vec<Responsible> = path
        .iter()
        .map(|(p, _)| line_of_production(g, p.0))
        .collect();
    responsible.dedup();
    Witness {
        kind: "unwritten".into(),
        summary: format!(
            "no update expression writes {key}, so no single user writes every entity of its group (A_w has no rule for it)"
        ),
        tree: Some(to_tree(g, &tree, &names)),
        key,
        users: Vec::new(),
        responsible,
        complete: notes.is_empty() && !b.cut,
        notes: cut_notes(b, notes),
    }
}

/// The witness of a parent and child with different writers: the path to the
/// parent, the child's occurrence and pattern, and the writes of parent and child.
fn two_writers(
    b: &mut Builder<'_>,
    namer: &mut Namer,
    (path, occ, child): (&[(Pattern, Option<usize>)], usize, &Pattern),
    (parent_write, child_write): (usize, usize),
) -> Witness {
    let g = b.g;
    let mut notes = Vec::new();
    let path = elide(g, path, &mut notes);
    b.next = path
        .iter()
        .map(|(p, _)| max_var(p))
        .chain([max_var(child)])
        .max()
        .unwrap_or(0);
    let tree = complete_path(b, path, Some(occ));
    note_all(namer, g, &tree);
    let parent = path
        .last()
        .map(|(p, _)| p.clone())
        .unwrap_or((0, Vec::new()));
    let parent_vars: Vec<usize> = path
        .iter()
        .flat_map(|(p, _)| p.1.iter())
        .filter_map(|p| if let P::V(v) = p { Some(*v) } else { None })
        .collect();
    // Contenders: writer variables of the contended children that the path does not bind.
    let mut contenders = Vec::new();
    let mut child_keys = Vec::new();
    collect_children(&tree, &parent, child.0, &mut child_keys);
    for c in &child_keys {
        if let Some((P::V(v), _)) = crate::symbolic::writer_of(g, &b.by_ctor, c)
            && !parent_vars.contains(&v)
        {
            contenders.push(v);
        }
    }
    let mut order = Vec::new();
    vars_in_order(&tree, &mut order);
    let names = namer.assign(&order, &contenders);
    let concrete = to_tree(g, &tree, &names);
    let (users, key) = contended_writers(g, &parent, &child_keys, &names);
    let pkey = to_tree(g, &STree::leaf(parent.clone()), &names).key();
    let mut responsible = vec![line_of_production(g, parent.0)];
    responsible.push(line_of_write(g, parent_write));
    responsible.push(line_of_write(g, child_write));
    let summary = if users.len() >= 2 {
        format!(
            "{pkey} and its children {} are in one entity group but written by different users: {}",
            child_keys_text(g, &child_keys, &names),
            users.join(" and ")
        )
    } else {
        format!("{pkey} and its child {key} have different writers")
    };
    Witness {
        kind: "two-writers".into(),
        summary,
        tree: Some(concrete),
        key,
        users,
        responsible,
        complete: notes.is_empty() && !b.cut,
        notes: cut_notes(b, notes),
    }
}

/// The last [`MAX_PATH`] levels of a path from a group's root, with a note
/// when the top was left out.
fn elide<'p>(
    g: &Grammar,
    path: &'p [(Pattern, Option<usize>)],
    notes: &mut Vec<String>,
) -> &'p [(Pattern, Option<usize>)] {
    if path.len() <= MAX_PATH {
        return path;
    }
    let top = path.first().map_or("", |(p, _)| g.name(p.0));
    notes.push(format!(
        "the entity group's root (a `{top}` key) is {} levels above the top node shown; the levels between follow the path of productions",
        path.len() - MAX_PATH
    ));
    &path[path.len() - MAX_PATH..]
}

/// `notes`, and one more if a smallest subtree was cut.
fn cut_notes(b: &Builder<'_>, mut notes: Vec<String>) -> Vec<String> {
    if b.cut {
        notes.push(format!(
            "nodes marked `cut` have more mandatory children than the witness shows (the smallest valid subtree is deeper than {MAX_SUBTREE_DEPTH} levels or the tree larger than {} nodes)",
            crate::finite::MAX_TREE_NODES
        ));
    }
    notes
}

/// The users who write the parent and the contended children (named by
/// `names`), and the key of the first child.
fn contended_writers(
    g: &Grammar,
    parent: &Pattern,
    child_keys: &[Pattern],
    names: &HashMap<usize, String>,
) -> (Vec<String>, String) {
    let d = Domains::new(g, 0);
    let pw = writers(
        g,
        &d,
        parent.0,
        &parent
            .1
            .iter()
            .map(|p| name_term(p, names))
            .collect::<Vec<_>>(),
    );
    let mut users: Vec<String> = pw;
    let mut key = String::new();
    for c in child_keys {
        let vals: Vec<String> = c.1.iter().map(|p| name_term(p, names)).collect();
        if key.is_empty() {
            key = to_tree(g, &STree::leaf(c.clone()), names).key();
        }
        for u in writers(g, &d, c.0, &vals) {
            if !users.contains(&u) {
                users.push(u);
            }
        }
    }
    // Two children by two other users show the paper's concurrent commenters.
    if users.len() > 2 && child_keys.len() > 1 {
        users.remove(0);
    }
    (users, key)
}

fn child_keys_text(g: &Grammar, keys: &[Pattern], names: &HashMap<usize, String>) -> String {
    keys.iter()
        .map(|c| to_tree(g, &STree::leaf(c.clone()), names).key())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The patterns of the children of ctor `child_ctor` directly under the node `parent`.
fn collect_children(t: &STree, parent: &Pattern, child_ctor: usize, out: &mut Vec<Pattern>) {
    if &t.pat == parent {
        for c in &t.children {
            if c.pat.0 == child_ctor && !out.contains(&c.pat) {
                out.push(c.pat.clone());
            }
        }
        return;
    }
    for c in &t.children {
        collect_children(c, parent, child_ctor, out);
    }
}

fn max_var(p: &Pattern) -> usize {
    p.1.iter()
        .filter_map(|t| if let P::V(v) = t { Some(v + 1) } else { None })
        .max()
        .unwrap_or(0)
}

/// The tree along `path`, every node completed with smallest subtrees; at the
/// end, `contended` occurrence children (two where the grammar allows).
fn complete_path(
    b: &mut Builder<'_>,
    path: &[(Pattern, Option<usize>)],
    contended: Option<usize>,
) -> STree {
    let Some(((last, _), rest)) = path.split_last() else {
        return STree::leaf((0, Vec::new()));
    };
    let mut sub = match contended {
        Some(occ) => {
            let two =
                b.g.production(last.0)
                    .is_some_and(|p| p.rhs.repeatable(occ));
            let atom = atom_at(b.g, last.0, occ);
            let slots = b.around(last, occ, two);
            let children = slots
                .into_iter()
                .map(|s| match s {
                    Some(t) => t,
                    None => {
                        let c = match &atom {
                            Some(a) => child_of(b.g, last, a, &mut b.next, &mut HashMap::new()),
                            None => (0, Vec::new()),
                        };
                        b.min_tree(c, 0)
                    }
                })
                .collect();
            STree {
                pat: last.clone(),
                children,
                cut: false,
            }
        }
        None => b.min_tree(last.clone(), 0),
    };
    let mut below_occ = path.last().and_then(|(_, o)| *o);
    for (pat, occ_in) in rest.iter().rev() {
        let occ = below_occ.unwrap_or(0);
        let slots = b.around(pat, occ, false);
        let mut target = Some(sub);
        let children = slots
            .into_iter()
            .filter_map(|s| match s {
                Some(t) => Some(t),
                None => target.take(),
            })
            .collect();
        sub = STree {
            pat: pat.clone(),
            children,
            cut: false,
        };
        below_occ = *occ_in;
    }
    sub
}
