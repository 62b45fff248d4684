//! Text and JSON output of a [`Report`].

use std::fmt::Write as _;

use crate::finite::{Domains, Tree, writers};
use crate::{Grammar, Report, Verdict};

/// The report as text, for a terminal.
pub fn text(g: &Grammar, r: &Report) -> String {
    let mut s = String::new();
    let _ = match r.verdict {
        Verdict::Safe => writeln!(
            s,
            "SAFE: every entity group is written by a single user (L(A_s) ⊆ L(A_w))"
        ),
        Verdict::Unsafe => writeln!(
            s,
            "UNSAFE: an entity group can be written by more than one user"
        ),
    };
    if let Some(w) = &r.witness {
        let _ = writeln!(s, "\nwhy: {}", w.summary);
        if let Some(t) = &w.tree {
            let _ = writeln!(s, "\nwitness entity group (in L(A_s), not in L(A_w)):");
            let d = Domains::new(g, 0);
            tree(g, &d, t, 1, &mut s);
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
                let _ = writeln!(
                    s,
                    "\nno automatic alternative: make every written key determine its writer (put the user variable in the key)"
                );
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
    s
}

fn tree(g: &Grammar, d: &Domains, t: &Tree, depth: usize, s: &mut String) {
    let who = g
        .keys
        .iter()
        .position(|k| k.name == t.kind)
        .map(|c| writers(g, d, c, &t.values))
        .unwrap_or_default();
    let by = if who.is_empty() {
        "written by nobody".to_owned()
    } else {
        format!("written by {}", who.join(" or "))
    };
    let _ = writeln!(s, "{}{}    [{by}]", "  ".repeat(depth), t.key());
    for c in &t.children {
        tree(g, d, c, depth + 1, s);
    }
}

/// The report as one JSON document.
pub fn json(r: &Report) -> serde_json::Value {
    serde_json::to_value(r).unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}))
}
