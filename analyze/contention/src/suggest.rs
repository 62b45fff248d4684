//! A suggested safe alternative: re-root the contended child under its own
//! writer's group (as the paper's user-oriented schema does by hand), or,
//! when its writer is a constant, make it the root of its own group. The
//! suggestion is re-checked; up to [`MAX_STEPS`] re-rootings are chained.

use crate::grammar::{Grammar, Regex, Template, Term, USER_SORT};
use crate::symbolic::{self, Finding, P, writer_of};

/// How many contended edges one suggestion may move.
pub const MAX_STEPS: usize = 8;

/// A changed schema that the checker found SAFE, and what was changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Suggestion {
    /// One line per change.
    pub changes: Vec<String>,
    /// The whole suggested schema in the input format.
    pub source: String,
    /// The re-check's verdict on it (always SAFE when a suggestion is returned).
    pub safe: bool,
}

/// Finds a safe alternative for an unsafe grammar, or `None`.
pub fn suggest(g: &Grammar) -> Option<Suggestion> {
    let mut cur = g.clone();
    let mut changes = Vec::new();
    for _ in 0..MAX_STEPS {
        match symbolic::check(&cur) {
            None => {
                return Some(Suggestion {
                    changes,
                    source: cur.to_source(),
                    safe: true,
                });
            }
            Some(Finding::TwoWriters {
                path, occ, child, ..
            }) => {
                let parent = path.last()?.0.clone();
                let (next, change) = reroot(&cur, parent.0, occ, &child)?;
                changes.push(change);
                cur = next;
            }
            Some(_) => return None,
        }
    }
    None
}

fn next_occ(g: &Grammar) -> usize {
    let mut m = 0;
    g.root.visit(&mut |o, _| m = m.max(o + 1));
    for p in g.productions.iter().flatten() {
        p.rhs.visit(&mut |o, _| m = m.max(o + 1));
    }
    m
}

fn remove_occ(r: &Regex, occ: usize) -> Regex {
    match r {
        Regex::Atom(o, _) if *o == occ => Regex::Eps,
        Regex::Eps | Regex::Atom(..) => r.clone(),
        Regex::Seq(v) => {
            let v: Vec<Regex> = v
                .iter()
                .map(|x| remove_occ(x, occ))
                .filter(|x| *x != Regex::Eps)
                .collect();
            match v.len() {
                0 => Regex::Eps,
                1 => v.into_iter().next().unwrap_or(Regex::Eps),
                _ => Regex::Seq(v),
            }
        }
        Regex::Alt(v) => {
            let mut out: Vec<Regex> = Vec::new();
            for x in v.iter().map(|x| remove_occ(x, occ)) {
                if !out.contains(&x) {
                    out.push(x);
                }
            }
            if out.len() == 1 {
                out.into_iter().next().unwrap_or(Regex::Eps)
            } else {
                Regex::Alt(out)
            }
        }
        Regex::Star(x) | Regex::Plus(x) | Regex::Opt(x) => {
            let inner = remove_occ(x, occ);
            if inner == Regex::Eps {
                Regex::Eps
            } else {
                match r {
                    Regex::Star(_) => Regex::Star(Box::new(inner)),
                    Regex::Plus(_) => Regex::Plus(Box::new(inner)),
                    _ => Regex::Opt(Box::new(inner)),
                }
            }
        }
    }
}

fn add_repeated(r: &Regex, atom: Regex) -> Regex {
    match r {
        Regex::Eps => Regex::Star(Box::new(atom)),
        Regex::Star(inner) => {
            let mut alts = match inner.as_ref() {
                Regex::Alt(v) => v.clone(),
                other => vec![other.clone()],
            };
            alts.push(atom);
            Regex::Star(Box::new(Regex::Alt(alts)))
        }
        other => Regex::Seq(vec![other.clone(), Regex::Star(Box::new(atom))]),
    }
}

/// Moves occurrence `occ` of `parent_ctor`'s production under the group of
/// the child's writer.
fn reroot(
    g: &Grammar,
    parent_ctor: usize,
    occ: usize,
    child: &symbolic::Pattern,
) -> Option<(Grammar, String)> {
    let atom = symbolic::atom_at(g, parent_ctor, occ)?;
    let (writer, _) = writer_of(g, child)?;
    let mut out = g.clone();
    let p = out.productions.get_mut(parent_ctor)?.as_mut()?;
    p.rhs = remove_occ(&p.rhs, occ);
    let new_occ = next_occ(g);
    // The writer's position in the child's key.
    let wpos = child.1.iter().position(|t| *t == writer);
    let owner = match (&writer, wpos) {
        (P::V(_), Some(wpos)) => owner_group(g, atom.ctor).map(|o| (o, wpos)),
        _ => None,
    };
    let change;
    match owner {
        Some(((octor, opos), wpos)) => {
            let oprod = out.productions.get_mut(octor)?.as_mut()?;
            let uvar = oprod.params.get(opos)?.clone();
            let args = atom
                .args
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    if i == wpos {
                        Term::Var(uvar.clone())
                    } else {
                        match a {
                            Term::Var(v) => Term::Var(prime(v, &oprod.params)),
                            c => c.clone(),
                        }
                    }
                })
                .collect();
            let moved = Template {
                ctor: atom.ctor,
                args,
                span: atom.span,
            };
            oprod.rhs = add_repeated(&oprod.rhs, Regex::Atom(new_occ, moved.clone()));
            change = format!(
                "move {} from under {} to under its writer's group {}",
                g.show(&atom),
                g.name(parent_ctor),
                g.show(&Template {
                    ctor: octor,
                    args: oprod.params.iter().cloned().map(Term::Var).collect(),
                    span: atom.span,
                }),
            ) + &format!(" (as {})", g.show(&moved));
        }
        None => {
            let moved = Template {
                ctor: atom.ctor,
                args: atom
                    .args
                    .iter()
                    .map(|a| match a {
                        Term::Var(v) => Term::Var(prime(v, &[])),
                        c => c.clone(),
                    })
                    .collect(),
                span: atom.span,
            };
            let alts = match &out.root {
                Regex::Alt(v) => {
                    let mut v = v.clone();
                    v.push(Regex::Atom(new_occ, moved.clone()));
                    v
                }
                other => vec![other.clone(), Regex::Atom(new_occ, moved.clone())],
            };
            out.root = Regex::Alt(alts);
            change = format!(
                "make {} the root of its own entity group (it was under {})",
                g.show(&atom),
                g.name(parent_ctor)
            );
        }
    }
    Some((out, change))
}

fn prime(v: &str, taken: &[String]) -> String {
    let mut n = if v.ends_with('\'') {
        v.to_owned()
    } else {
        format!("{v}'")
    };
    while taken.contains(&n) {
        n.push('\'');
    }
    n
}

/// A group root a user owns: a constructor in `root` whose key holds a user
/// variable that writes it (`put_u(users(u))`). Returns it and that position.
fn owner_group(g: &Grammar, not: usize) -> Option<(usize, usize)> {
    for t in g.root.atoms() {
        if t.ctor == not {
            continue;
        }
        for w in g.writes.iter().filter(|w| w.key.ctor == t.ctor) {
            let Term::Var(x) = &w.writer else { continue };
            if let Some(pos) = w.key.args.iter().position(|a| a == &Term::Var(x.clone()))
                && g.keys[t.ctor].sorts[pos] == USER_SORT
                && g.production(t.ctor).is_some()
            {
                return Some((t.ctor, pos));
            }
        }
    }
    None
}
