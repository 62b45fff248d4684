//! The grammar model: key constructors, templates, productions with regular
//! expressions over templates, and update expressions.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::Span;

/// The sort of every writer: users.
pub const USER_SORT: &str = "user";

/// An argument of a key template.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Term {
    /// A variable. On the left of a production it is bound; on the right,
    /// one that the left does not bind ranges over its whole sort for each
    /// child (the paper's `|_{x ∈ X}` shorthand).
    Var(String),
    /// A constant, written `"Alice"`.
    Const(String),
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Term::Var(v) => f.write_str(v),
            Term::Const(c) => write!(f, "\"{c}\""),
        }
    }
}

/// A key template: a key constructor applied to terms, `comments(u', a)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    /// The index of the constructor in [`Grammar::keys`].
    pub ctor: usize,
    /// One term per parameter.
    pub args: Vec<Term>,
    /// Where it is written.
    pub span: Span,
}

/// A regular expression over key templates: the sequence of a node's children.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Regex {
    /// No children.
    #[default]
    Eps,
    /// One child matching the template. The number identifies the occurrence
    /// within its production.
    Atom(usize, Template),
    /// One after the other.
    Seq(Vec<Regex>),
    /// One of.
    Alt(Vec<Regex>),
    /// Zero or more.
    Star(Box<Regex>),
    /// One or more.
    Plus(Box<Regex>),
    /// Zero or one.
    Opt(Box<Regex>),
}

impl Regex {
    /// Every atom, in order.
    pub fn atoms(&self) -> Vec<&Template> {
        let mut out = Vec::new();
        self.visit(&mut |_, t| out.push(t));
        out
    }

    /// Calls `f` with each atom's occurrence number and template.
    pub fn visit<'a>(&'a self, f: &mut impl FnMut(usize, &'a Template)) {
        match self {
            Regex::Eps => {}
            Regex::Atom(i, t) => f(*i, t),
            Regex::Seq(v) | Regex::Alt(v) => v.iter().for_each(|r| r.visit(f)),
            Regex::Star(r) | Regex::Plus(r) | Regex::Opt(r) => r.visit(f),
        }
    }

    /// Whether the expression matches some word whose atoms all satisfy `ok`.
    pub fn can(&self, ok: &impl Fn(&Template) -> bool) -> bool {
        match self {
            Regex::Eps | Regex::Star(_) | Regex::Opt(_) => true,
            Regex::Atom(_, t) => ok(t),
            Regex::Seq(v) => v.iter().all(|r| r.can(ok)),
            Regex::Alt(v) => v.iter().any(|r| r.can(ok)),
            Regex::Plus(r) => r.can(ok),
        }
    }

    /// The atoms that occur in some word matched by the expression whose
    /// atoms all satisfy `ok` (the children a valid tree can actually have).
    pub fn live_atoms(&self, ok: &impl Fn(&Template) -> bool) -> Vec<(usize, &Template)> {
        let mut out = Vec::new();
        self.live_into(ok, &mut out);
        out
    }

    fn live_into<'a>(
        &'a self,
        ok: &impl Fn(&Template) -> bool,
        out: &mut Vec<(usize, &'a Template)>,
    ) {
        if !self.can(ok) {
            return;
        }
        match self {
            Regex::Eps => {}
            Regex::Atom(i, t) => out.push((*i, t)),
            Regex::Seq(v) | Regex::Alt(v) => v.iter().for_each(|r| r.live_into(ok, out)),
            Regex::Star(r) | Regex::Plus(r) | Regex::Opt(r) => r.live_into(ok, out),
        }
    }

    /// Whether occurrence `occ` is under a `*` or `+` (a node can have two such children).
    pub fn repeatable(&self, occ: usize) -> bool {
        fn go(r: &Regex, occ: usize, under: bool) -> Option<bool> {
            match r {
                Regex::Eps => None,
                Regex::Atom(i, _) => (*i == occ).then_some(under),
                Regex::Seq(v) | Regex::Alt(v) => v.iter().find_map(|r| go(r, occ, under)),
                Regex::Star(r) | Regex::Plus(r) => go(r, occ, true),
                Regex::Opt(r) => go(r, occ, under),
            }
        }
        go(self, occ, false).unwrap_or(false)
    }
}

/// `key NAME(SORT, ...)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDecl {
    /// The constructor's name (the entity kind).
    pub name: String,
    /// The sort of each parameter (`user` for user ids).
    pub sorts: Vec<String>,
    /// Where it is declared.
    pub span: Span,
}

/// `NAME(x, y) ::= REGEX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Production {
    /// The constructor this production is for.
    pub ctor: usize,
    /// The bound variables, one per parameter, all different.
    pub params: Vec<String>,
    /// The children.
    pub rhs: Regex,
    /// Where it is written.
    pub span: Span,
}

/// `put` or `del`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp {
    /// `put_u(k)` / `put_u(k, v)`.
    Put,
    /// `del_u(k)`.
    Del,
}

/// An update expression: user `writer` writes keys matching `key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteExpr {
    /// put or del.
    pub op: WriteOp,
    /// The writing user: a variable (bound by the key, or not) or a constant.
    pub writer: Term,
    /// The keys written.
    pub key: Template,
    /// Where it is written.
    pub span: Span,
}

/// A checked grammar with its update expressions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grammar {
    /// The key constructors.
    pub keys: Vec<KeyDecl>,
    /// Optional names per sort (`domain user = Alice, Bob`), used for the
    /// finite instantiation and to name witnesses.
    pub domains: BTreeMap<String, Vec<String>>,
    /// The start production `root ::= REGEX`: its atoms are the entities that
    /// may be the top of an entity group.
    pub root: Regex,
    /// Where `root` is written.
    pub root_span: Span,
    /// At most one production per constructor, indexed like [`Grammar::keys`].
    pub productions: Vec<Option<Production>>,
    /// The update expressions.
    pub writes: Vec<WriteExpr>,
}

impl Grammar {
    /// The constructor's name.
    pub fn name(&self, ctor: usize) -> &str {
        &self.keys[ctor].name
    }

    /// The production of a constructor (every constructor has one after parsing).
    pub fn production(&self, ctor: usize) -> Option<&Production> {
        self.productions.get(ctor).and_then(Option::as_ref)
    }

    /// The largest arity of any constructor.
    pub fn max_arity(&self) -> usize {
        self.keys.iter().map(|k| k.sorts.len()).max().unwrap_or(0)
    }

    /// Every sort used, with `user` always first.
    pub fn sorts(&self) -> Vec<String> {
        let mut out = vec![USER_SORT.to_owned()];
        let mut seen: HashSet<&str> = HashSet::from([USER_SORT]);
        for k in &self.keys {
            for s in &k.sorts {
                if seen.insert(s) {
                    out.push(s.clone());
                }
            }
        }
        out
    }

    /// The constructor of each key name.
    pub fn ctor_index(&self) -> HashMap<&str, usize> {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.name.as_str(), i))
            .collect()
    }

    /// The update expressions of each constructor (indexes into [`Grammar::writes`]).
    pub fn writes_by_ctor(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.keys.len()];
        for (i, w) in self.writes.iter().enumerate() {
            if let Some(v) = out.get_mut(w.key.ctor) {
                v.push(i);
            }
        }
        out
    }

    /// The constants written in the file, per sort.
    pub fn constants(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut seen: HashSet<(String, String)> = HashSet::new();
        let mut add = |sort: &str, c: &str| {
            if seen.insert((sort.to_owned(), c.to_owned())) {
                out.entry(sort.to_owned()).or_default().push(c.to_owned());
            }
        };
        let mut templates: Vec<&Template> = self.root.atoms();
        for p in self.productions.iter().flatten() {
            templates.extend(p.rhs.atoms());
        }
        for w in &self.writes {
            templates.push(&w.key);
            if let Term::Const(c) = &w.writer {
                add(USER_SORT, c);
            }
        }
        for t in templates {
            for (i, a) in t.args.iter().enumerate() {
                if let Term::Const(c) = a {
                    add(&self.keys[t.ctor].sorts[i], c);
                }
            }
        }
        out
    }

    /// A template as text, `comments(u', a)`.
    pub fn show(&self, t: &Template) -> String {
        show_key(self.name(t.ctor), &t.args)
    }

    /// A regular expression as text, in the input syntax.
    pub fn show_regex(&self, r: &Regex) -> String {
        fn go(g: &Grammar, r: &Regex, prec: u8) -> String {
            match r {
                Regex::Eps => "eps".into(),
                Regex::Atom(_, t) => g.show(t),
                // One item, or none: what the parser reads back (see `canonical`).
                Regex::Seq(v) | Regex::Alt(v) if v.len() == 1 => go(g, &v[0], prec),
                Regex::Seq(v) if v.is_empty() => "eps".into(),
                Regex::Seq(v) => {
                    let s = v.iter().map(|r| go(g, r, 2)).collect::<Vec<_>>().join(" ");
                    if prec > 1 { format!("({s})") } else { s }
                }
                Regex::Alt(v) => {
                    let s = v
                        .iter()
                        .map(|r| go(g, r, 1))
                        .collect::<Vec<_>>()
                        .join(" | ");
                    if prec > 0 { format!("({s})") } else { s }
                }
                Regex::Star(r) => format!("{}*", go(g, r, 3)),
                Regex::Plus(r) => format!("{}+", go(g, r, 3)),
                Regex::Opt(r) => format!("{}?", go(g, r, 3)),
            }
        }
        go(self, r, 0)
    }

    /// The whole grammar in the input syntax (used for the suggested schema).
    pub fn to_source(&self) -> String {
        let mut s = String::new();
        for k in &self.keys {
            s.push_str(&format!("key {}({})\n", k.name, k.sorts.join(", ")));
        }
        for (sort, vals) in &self.domains {
            if vals.is_empty() {
                continue;
            }
            let vals: Vec<String> = vals.iter().map(|v| show_value(v)).collect();
            s.push_str(&format!("domain {sort} = {}\n", vals.join(", ")));
        }
        s.push_str(&format!("root ::= {}\n", self.show_regex(&self.root)));
        for p in self.productions.iter().flatten() {
            let lhs = show_key(
                self.name(p.ctor),
                &p.params.iter().cloned().map(Term::Var).collect::<Vec<_>>(),
            );
            s.push_str(&format!("{lhs} ::= {}\n", self.show_regex(&p.rhs)));
        }
        for w in &self.writes {
            s.push_str(&format!("{}\n", self.show_write(w)));
        }
        s
    }

    /// An update expression as text, `put_u(comments(u, a))`.
    pub fn show_write(&self, w: &WriteExpr) -> String {
        let op = match w.op {
            WriteOp::Put => "put",
            WriteOp::Del => "del",
        };
        match &w.writer {
            Term::Var(v) => format!("{op}_{v}({})", self.show(&w.key)),
            Term::Const(c) => format!("{op}_\"{c}\"({})", self.show(&w.key)),
        }
    }
}

impl Grammar {
    /// The grammar as the parser reads back its [`Grammar::to_source`]: no
    /// places, atoms numbered in the order of the text (`root` first, then
    /// the productions by constructor), one-item sequences and alternatives
    /// as their item. Two grammars with equal canonical forms are the same schema.
    pub fn canonical(&self) -> Grammar {
        fn regex(r: &Regex, next: &mut usize) -> Regex {
            match r {
                Regex::Eps => Regex::Eps,
                Regex::Atom(_, t) => {
                    *next += 1;
                    Regex::Atom(*next - 1, template(t))
                }
                Regex::Seq(v) if v.is_empty() => Regex::Eps,
                Regex::Seq(v) | Regex::Alt(v) if v.len() == 1 => regex(&v[0], next),
                Regex::Seq(v) => Regex::Seq(v.iter().map(|r| regex(r, next)).collect()),
                Regex::Alt(v) => Regex::Alt(v.iter().map(|r| regex(r, next)).collect()),
                Regex::Star(r) => Regex::Star(Box::new(regex(r, next))),
                Regex::Plus(r) => Regex::Plus(Box::new(regex(r, next))),
                Regex::Opt(r) => Regex::Opt(Box::new(regex(r, next))),
            }
        }
        fn template(t: &Template) -> Template {
            Template {
                span: Span::default(),
                ..t.clone()
            }
        }
        let mut next = 0;
        let root = regex(&self.root, &mut next);
        let productions = self
            .productions
            .iter()
            .map(|p| {
                p.as_ref().map(|p| Production {
                    rhs: regex(&p.rhs, &mut next),
                    span: Span::default(),
                    ..p.clone()
                })
            })
            .collect();
        Grammar {
            keys: self
                .keys
                .iter()
                .map(|k| KeyDecl {
                    span: Span::default(),
                    ..k.clone()
                })
                .collect(),
            domains: self
                .domains
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            root,
            root_span: Span::default(),
            productions,
            writes: self
                .writes
                .iter()
                .map(|w| WriteExpr {
                    key: template(&w.key),
                    span: Span::default(),
                    ..w.clone()
                })
                .collect(),
        }
    }
}

impl Grammar {
    /// Whether two grammars are the same schema: [`Grammar::canonical`]
    /// forms equal, compared in place (no copy of either).
    pub fn same_schema(&self, other: &Grammar) -> bool {
        fn norm(r: &Regex) -> &Regex {
            match r {
                Regex::Seq(v) | Regex::Alt(v) if v.len() == 1 => norm(&v[0]),
                _ => r,
            }
        }
        fn eq(a: &Regex, b: &Regex) -> bool {
            match (norm(a), norm(b)) {
                (Regex::Eps, Regex::Eps) => true,
                (Regex::Seq(v), Regex::Eps) | (Regex::Eps, Regex::Seq(v)) => v.is_empty(),
                (Regex::Atom(_, x), Regex::Atom(_, y)) => x.ctor == y.ctor && x.args == y.args,
                (Regex::Seq(x), Regex::Seq(y)) | (Regex::Alt(x), Regex::Alt(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(a, b)| eq(a, b))
                }
                (Regex::Star(x), Regex::Star(y))
                | (Regex::Plus(x), Regex::Plus(y))
                | (Regex::Opt(x), Regex::Opt(y)) => eq(x, y),
                _ => false,
            }
        }
        let domains = |g: &Grammar| {
            g.domains
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>()
        };
        self.keys.len() == other.keys.len()
            && self
                .keys
                .iter()
                .zip(&other.keys)
                .all(|(a, b)| a.name == b.name && a.sorts == b.sorts)
            && domains(self) == domains(other)
            && eq(&self.root, &other.root)
            && self.productions.len() == other.productions.len()
            && self
                .productions
                .iter()
                .zip(&other.productions)
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => {
                        a.ctor == b.ctor && a.params == b.params && eq(&a.rhs, &b.rhs)
                    }
                    (None, None) => true,
                    _ => false,
                })
            && self.writes.len() == other.writes.len()
            && self.writes.iter().zip(&other.writes).all(|(a, b)| {
                a.op == b.op
                    && a.writer == b.writer
                    && a.key.ctor == b.key.ctor
                    && a.key.args == b.key.args
            })
    }
}

/// Whether `s` is read back as one name (letters, digits, `_`, then primes; not `eps`).
pub fn is_name(s: &str) -> bool {
    let body = s.trim_end_matches('\'');
    !body.is_empty()
        && s != "eps"
        && !body.starts_with('ε')
        && body.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// A domain value as the parser reads it back: bare if it is a name, else quoted.
pub fn show_value(v: &str) -> String {
    if is_name(v) {
        v.to_owned()
    } else {
        format!("\"{v}\"")
    }
}

/// `name(a, b)`, or `name` without arguments.
pub fn show_key(name: &str, args: &[Term]) -> String {
    if args.is_empty() {
        return name.to_owned();
    }
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    format!("{name}({})", args.join(", "))
}
