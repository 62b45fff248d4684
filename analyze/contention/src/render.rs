//! Text and JSON output of a [`Report`].

use std::fmt::Write as _;

use crate::finite::{Domains, Tree, writers_among};
use crate::{Grammar, Report, Verdict};

/// The report as text, for a terminal.
pub fn text(g: &Grammar, r: &Report) -> String {
    let mut s = String::new();
    let _ = match r.verdict {
        Verdict::Safe => writeln!(
            s,
            "SAFE: every entity group is written by a single user (L(A_s) ⊆ L(A_w))"
        ),
        Verdict::Unsafe => writeln!(s, "UNSAFE: {}", headline(r)),
    };
    if let Some(w) = &r.witness {
        let _ = writeln!(s, "\nwhy: {}", w.summary);
        if let Some(t) = &w.tree {
            if w.complete {
                let _ = writeln!(s, "\nwitness entity group (in L(A_s), not in L(A_w)):");
            } else {
                let _ = writeln!(
                    s,
                    "\nwitness entity group, cut to stay printable (not a whole group; see the notes):"
                );
            }
            let d = Domains::new(g, 0);
            let index = g.ctor_index();
            let by_ctor = g.writes_by_ctor();
            tree(
                &Ctx {
                    g,
                    d: &d,
                    index: &index,
                    by_ctor: &by_ctor,
                },
                t,
                1,
                &mut s,
            );
            for n in &w.notes {
                let _ = writeln!(s, "  note: {n}");
            }
        }
        if !w.users.is_empty() {
            let _ = writeln!(s, "\nwritten by: {}", w.users.join(", "));
        }
        let _ = writeln!(s, "\nresponsible:");
        for r in &w.responsible {
            let _ = writeln!(s, "  line {}: {}", r.line, r.text);
        }
    }
    if r.verdict == Verdict::Unsafe {
        match &r.suggestion {
            Some(sug) => {
                let _ = writeln!(s, "\nsuggested safe alternative (re-checked: SAFE):");
                for c in &sug.changes {
                    let _ = writeln!(s, "  - {c}");
                }
                let _ = writeln!(s);
                for line in sug.source.lines() {
                    let _ = writeln!(s, "    {line}");
                }
            }
            None => {
                let _ = writeln!(s, "\nno automatic alternative: {}", advice(g, r));
            }
        }
    }
    match (&r.finite, &r.finite_skipped) {
        (Some(f), _) => {
            let v = if f.safe() { "SAFE" } else { "UNSAFE" };
            let agree = if r.disagreement() {
                "DISAGREES with the symbolic check"
            } else {
                "agrees"
            };
            let _ = writeln!(
                s,
                "\nfinite check (the paper's hedge automata over {} keys): {v}, {agree}",
                f.alphabet
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(s, "\nfinite check skipped: {why}");
        }
        _ => {}
    }
    for n in &r.notes {
        let _ = writeln!(s, "\nnote: {n}");
    }
    s
}

/// The UNSAFE headline: what kind of witness was found.
pub fn headline(r: &Report) -> &'static str {
    match r.witness.as_ref().map(|w| w.kind.as_str()) {
        Some("unwritten") => {
            "an entity group contains a key that no update expression writes, so no single user writes the whole group"
        }
        Some("ambiguous-write") => {
            "a key can be written by two different users (A_w is nondeterministic)"
        }
        _ => "an entity group can be written by more than one user",
    }
}

/// What to do when no safe alternative was found, by the kind of witness.
pub fn advice(g: &Grammar, r: &Report) -> String {
    let Some(w) = &r.witness else {
        return "none needed".into();
    };
    match w.kind.as_str() {
        "unwritten" => format!(
            "add an update expression for the key {} (e.g. `put_u(...)` naming its writer), or take it out of the grammar",
            w.key
        ),
        "ambiguous-write" => ambiguous_advice(g, w),
        _ => "move the contended child out of its parent's group into a group its own writer owns (a key in `root` whose update expression binds that user)".into(),
    }
}

/// Advice for a key two users may write: which of the two expressions lets
/// a user write it without being in the key, and whether the key has a
/// place for the user at all.
fn ambiguous_advice(g: &Grammar, w: &crate::Witness) -> String {
    let free_writer = w.responsible.iter().find_map(|r| {
        g.writes.iter().find(|x| {
            x.span.line == r.line
                && match &x.writer {
                    crate::grammar::Term::Var(v) => {
                        !x.key.args.contains(&crate::grammar::Term::Var(v.clone()))
                    }
                    crate::grammar::Term::Const(_) => false,
                }
        })
    });
    match free_writer {
        Some(x) => {
            let k = &g.keys[x.key.ctor];
            if k.sorts.iter().any(|s| s == crate::grammar::USER_SORT) {
                format!(
                    "`{}` lets any user write any `{}` key: name the writer in the key (use the writer's variable at the key's `user` argument)",
                    g.show_write(x),
                    k.name
                )
            } else {
                format!(
                    "`{}` lets any user write any `{}` key, and the key has no `user` argument to name its writer: give `{}` one (`key {}({}, user)`) or keep one writer per key (a constant writer such as `put_\"admin\"`)",
                    g.show_write(x),
                    k.name,
                    k.name,
                    k.name,
                    k.sorts.join(", ")
                )
            }
        }
        None => format!(
            "two update expressions give {} two different writers ({}); keep one writer per key: remove one expression or give the other writer's entities a kind of their own",
            w.key,
            w.users.join(" and ")
        ),
    }
}

/// What the tree printer looks up.
struct Ctx<'a> {
    g: &'a Grammar,
    d: &'a Domains,
    index: &'a std::collections::HashMap<&'a str, usize>,
    by_ctor: &'a [Vec<usize>],
}

fn tree(cx: &Ctx<'_>, t: &Tree, depth: usize, s: &mut String) {
    let who = cx
        .index
        .get(t.kind.as_str())
        .map(|&c| writers_among(cx.g, cx.d, &cx.by_ctor[c], &t.values))
        .unwrap_or_default();
    let by = if who.is_empty() {
        "written by nobody".to_owned()
    } else {
        format!("written by {}", who.join(" or "))
    };
    let cut = if t.cut {
        "    … cut: its smallest valid subtree goes on below"
    } else {
        ""
    };
    let _ = writeln!(s, "{}{}    [{by}]{cut}", "  ".repeat(depth), t.key());
    for c in &t.children {
        tree(cx, c, depth + 1, s);
    }
}

/// The report as one JSON document.
pub fn json(r: &Report) -> serde_json::Value {
    serde_json::to_value(r).unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}))
}
