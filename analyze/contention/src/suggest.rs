//! A suggested safe alternative: re-root the contended child under its own
//! writer's group (as the paper's user-oriented schema does by hand), or,
//! when its writer is a constant, make it the root of its own group. The
//! suggestion is re-checked; up to [`MAX_STEPS`] re-rootings are chained.

use std::collections::{HashMap, HashSet};

use crate::grammar::{Grammar, Regex, Template, Term, USER_SORT};
use crate::limits::{Limits, Stop};
use crate::parser::parse;
use crate::symbolic::{self, Finding, P, writer_of};

/// How many contended edges one suggestion may move.
pub const MAX_STEPS: usize = 8;

/// A changed schema that the checker found SAFE, and what was changed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Suggestion {
    /// One line per change.
    pub changes: Vec<String>,
    /// The whole suggested schema in the input format: exactly the text the
    /// re-check parsed and found SAFE.
    pub source: String,
    /// The re-check's verdict on it (always SAFE when a suggestion is returned).
    pub safe: bool,
    /// The changed grammar before printing; `source` parses back to it
    /// ([`Grammar::canonical`] of both are equal).
    #[serde(skip)]
    pub schema: Grammar,
}

/// Finds a safe alternative for an unsafe grammar, or `None`.
pub fn suggest(g: &Grammar) -> Option<Suggestion> {
    suggest_with(g, &Limits::none()).ok().flatten()
}

/// [`suggest`] that stops at `limits`.
///
/// # Errors
/// [`Stop`] when cancelled or past the deadline.
pub fn suggest_with(g: &Grammar, limits: &Limits<'_>) -> Result<Option<Suggestion>, Stop> {
    let mut cur = g.clone();
    let mut changes = Vec::new();
    for _ in 0..=MAX_STEPS {
        match symbolic::check_with(&cur, limits)? {
            None if changes.is_empty() => return Ok(None),
            None => return recheck_printed(cur, changes, limits),
            Some(Finding::TwoWriters {
                path, occ, child, ..
            }) if changes.len() < MAX_STEPS => {
                let Some(parent) = path.last().map(|p| p.0.clone()) else {
                    return Ok(None);
                };
                let Some((next, change)) = reroot(&cur, parent.0, occ, &child) else {
                    return Ok(None);
                };
                changes.push(change);
                cur = next;
            }
            Some(_) => return Ok(None),
        }
    }
    Ok(None)
}

/// Prints the changed grammar and re-checks the printed text itself: the
/// suggestion is what a user gets by copying it. A text that does not parse
/// back to the same schema (a printer bug) gives no suggestion rather than
/// a wrong one.
fn recheck_printed(
    schema: Grammar,
    changes: Vec<String>,
    limits: &Limits<'_>,
) -> Result<Option<Suggestion>, Stop> {
    let source = schema.to_source();
    let Ok(printed) = parse(&source) else {
        return Ok(None);
    };
    if !printed.same_schema(&schema) {
        return Ok(None);
    }
    if symbolic::check_with(&printed, limits)?.is_some() {
        return Ok(None);
    }
    Ok(Some(Suggestion {
        changes,
        source,
        safe: true,
        schema,
    }))
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
    let by_ctor = g.writes_by_ctor();
    let (writer, _) = writer_of(g, &by_ctor, child)?;
    let mut out = g.clone();
    let p = out.productions.get_mut(parent_ctor)?.as_mut()?;
    p.rhs = remove_occ(&p.rhs, occ);
    let new_occ = next_occ(g);
    // The atom's variable that holds the writer in the child's key.
    let wvar = match &writer {
        P::V(_) => child
            .1
            .iter()
            .position(|t| *t == writer)
            .and_then(|i| match atom.args.get(i) {
                Some(Term::Var(x)) => Some(x.clone()),
                _ => None,
            }),
        P::C(_) => None,
    };
    let owner = wvar
        .as_ref()
        .and_then(|_| owner_group(g, &by_ctor, atom.ctor));
    let change;
    match (owner, wvar) {
        (Some((octor, opos)), Some(wvar)) => {
            let oprod = out.productions.get_mut(octor)?.as_mut()?;
            let uvar = oprod.params.get(opos)?.clone();
            // The writer becomes the owner's user; every other variable a
            // name the owner's production does not use (one per variable,
            // so distinct variables stay distinct).
            let used = var_sorts(g, &oprod.rhs);
            let bound: HashSet<String> = oprod.params.iter().cloned().collect();
            let names = HashMap::from([(wvar, uvar)]);
            let moved = rename(g, &atom, names, &bound, &used);
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
        _ => {
            // `root` is read with one sort per variable name: fresh names there too.
            let used = var_sorts(g, &out.root);
            let moved = rename(g, &atom, HashMap::new(), &HashSet::new(), &used);
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
                g.show(&moved),
                g.name(parent_ctor)
            );
        }
    }
    Some((out, change))
}

/// The sort of each variable of a regular expression's atoms.
fn var_sorts(g: &Grammar, r: &Regex) -> HashMap<String, String> {
    let mut out = HashMap::new();
    r.visit(&mut |_, t| {
        for (a, sort) in t.args.iter().zip(&g.keys[t.ctor].sorts) {
            if let Term::Var(v) = a {
                out.insert(v.clone(), sort.clone());
            }
        }
    });
    out
}

/// The template with its variables renamed for a production whose
/// parameters are `bound` and whose atoms use the variables `used` (with
/// their sorts): by `names` where given, else to the first of `v'`, `v''`,
/// ... that is not bound, not another variable's new name, and not used
/// with another sort (a variable that the left side does not bind ranges
/// over its sort independently for each atom, so sharing a name of the same
/// sort with another atom changes nothing).
fn rename(
    g: &Grammar,
    t: &Template,
    mut names: HashMap<String, String>,
    bound: &HashSet<String>,
    used: &HashMap<String, String>,
) -> Template {
    let mut chosen: HashSet<String> = names.values().cloned().collect();
    let args = t
        .args
        .iter()
        .zip(&g.keys[t.ctor].sorts)
        .map(|(a, sort)| match a {
            Term::Var(v) => {
                let n = names
                    .entry(v.clone())
                    .or_insert_with(|| {
                        let mut n = format!("{v}'");
                        while bound.contains(&n)
                            || chosen.contains(&n)
                            || used.get(&n).is_some_and(|s| s != sort)
                        {
                            n.push('\'');
                        }
                        chosen.insert(n.clone());
                        n
                    })
                    .clone();
                Term::Var(n)
            }
            c => c.clone(),
        })
        .collect();
    Template {
        ctor: t.ctor,
        args,
        span: t.span,
    }
}

/// A group root a user owns: a constructor in `root` whose key holds a user
/// variable that writes it (`put_u(users(u))`). Returns it and that position.
fn owner_group(g: &Grammar, by_ctor: &[Vec<usize>], not: usize) -> Option<(usize, usize)> {
    for t in g.root.atoms() {
        if t.ctor == not {
            continue;
        }
        for w in by_ctor.get(t.ctor)?.iter().map(|&i| &g.writes[i]) {
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
