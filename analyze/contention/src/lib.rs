//! The \[MC\] write-contention model check (Scherzinger et al., "On the
//! Necessity of Model Checking NoSQL Database Schemas when Building SaaS
//! Applications"): is every entity group of a schema written by one user only?
//!
//! Input: an extended regular tree grammar over key templates and the users'
//! update expressions ([`parse`], format in docs/contention.md). The check runs
//! two ways: [`symbolic`] on templates with variables (the verdict and the
//! witness), and [`finite`], the paper's hedge-automata algorithm over an
//! instantiated finite alphabet, as a cross-check. An unsafe schema gets a
//! [`Witness`] and, where possible, a re-checked [`Suggestion`].

mod error;
pub mod finite;
pub mod grammar;
mod lexer;
mod limits;
mod nfa;
mod parser;
#[doc(hidden)]
pub mod product;
pub mod render;
mod suggest;
pub mod symbolic;
pub mod synthetic;
mod witness;

use serde::Serialize;

pub use error::{Error, Span, Warning};
pub use finite::{Domains, FiniteResult, Tree};
pub use grammar::Grammar;
pub use limits::{Limits, Stop};
pub use parser::parse;
pub use suggest::{MAX_STEPS, Suggestion, suggest, suggest_with};
pub use witness::{MAX_PATH, Responsible, Witness};

/// SAFE or UNSAFE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    /// No entity group can be written by two users.
    Safe,
    /// Some entity group can be written by two users (or by none).
    Unsafe,
}

/// The largest alphabet the finite cross-check instantiates.
pub const FINITE_LIMIT: usize = 20_000;

/// Everything the analysis found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The verdict of the symbolic check.
    pub verdict: Verdict,
    /// Why it is unsafe.
    pub witness: Option<Witness>,
    /// A safe alternative, re-checked.
    pub suggestion: Option<Suggestion>,
    /// The finite cross-check over a sufficient instantiation, unless too large.
    pub finite: Option<FiniteResult>,
    /// Why the finite check did not run.
    pub finite_skipped: Option<String>,
    /// Problems that do not stop the analysis.
    pub warnings: Vec<Warning>,
    /// What the analysis left out and why (e.g. a phase stopped at the time limit).
    pub notes: Vec<String>,
}

impl Report {
    /// Whether the finite check ran and disagrees with the symbolic one (a bug).
    pub fn disagreement(&self) -> bool {
        self.finite
            .as_ref()
            .is_some_and(|f| f.safe() != (self.verdict == Verdict::Safe))
    }
}

/// The symbolic verdict alone.
pub fn verdict(g: &Grammar) -> Verdict {
    if symbolic::check(g).is_none() {
        Verdict::Safe
    } else {
        Verdict::Unsafe
    }
}

/// Warnings: update expressions for keys no valid entity group contains.
pub fn warnings(g: &Grammar) -> Vec<Warning> {
    let prod = symbolic::productive(g);
    let mut reach = vec![false; g.keys.len()];
    let mut stack: Vec<usize> = g
        .root
        .atoms()
        .iter()
        .map(|t| t.ctor)
        .filter(|&c| prod[c])
        .collect();
    while let Some(c) = stack.pop() {
        if reach[c] {
            continue;
        }
        reach[c] = true;
        if let Some(p) = g.production(c) {
            stack.extend(
                p.rhs
                    .live_atoms(&|t| prod[t.ctor])
                    .iter()
                    .map(|(_, t)| t.ctor),
            );
        }
    }
    // Where each kind occurs (in `root` or under some production).
    let mut mentioned = vec![false; g.keys.len()];
    for t in g.root.atoms() {
        mentioned[t.ctor] = true;
    }
    for p in g.productions.iter().flatten() {
        p.rhs.visit(&mut |_, t| mentioned[t.ctor] = true);
    }
    let mut out = Vec::new();
    for w in &g.writes {
        let c = w.key.ctor;
        if reach[c] {
            continue;
        }
        let name = g.name(c);
        let why = if !prod[c] {
            format!(
                "no `{name}` key has a finite valid tree (every one needs a child that in turn needs one, without end): make a child optional (`*`, `?` or `| eps`) in the productions of that cycle"
            )
        } else if mentioned[c] {
            format!(
                "`{name}` occurs only under keys that no entity group contains either (not reachable from `root`, or without a finite valid tree)"
            )
        } else {
            format!("add `{name}` to a production or to `root`")
        };
        out.push(Warning {
            span: w.key.span,
            message: format!(
                "{} writes `{name}` keys, which no entity group of the grammar contains; {why}",
                g.show_write(w)
            ),
        });
    }
    if !g.root.atoms().iter().any(|t| prod[t.ctor]) {
        out.push(Warning {
            span: g.root_span,
            message: "no key in `root` has a finite valid tree, so there are no entity groups (trivially SAFE)".into(),
        });
    }
    out
}

/// Parses and analyses a grammar file.
///
/// # Errors
/// A syntax or consistency error at its line and column.
pub fn analyze(src: &str) -> Result<Report, Error> {
    let g = parse(src)?;
    Ok(analyze_grammar(&g))
}

/// Analyses a parsed grammar, to the end.
pub fn analyze_grammar(g: &Grammar) -> Report {
    match analyze_with(g, &Limits::none()) {
        Ok(r) => r,
        // No limit: nothing stops it. Should it anyway, the verdict is
        // computed again without the optional phases.
        Err(_) => Report {
            verdict: verdict(g),
            witness: symbolic::check(g).map(|f| witness::build(g, &f)),
            suggestion: None,
            finite: None,
            finite_skipped: Some("stopped".into()),
            warnings: warnings(g),
            notes: Vec::new(),
        },
    }
}

/// Analyses a parsed grammar within `limits`. The verdict needs the symbolic
/// check to finish; the optional phases (the suggestion, the finite
/// cross-check) stop at the time limit with a note in [`Report::notes`].
///
/// # Errors
/// [`Stop::Cancelled`] when cancelled at any point; [`Stop::TimeLimit`] when
/// the time limit passes before the symbolic check has a verdict.
pub fn analyze_with(g: &Grammar, limits: &Limits<'_>) -> Result<Report, Stop> {
    let finding = symbolic::check_with(g, limits)?;
    let verdict = if finding.is_none() {
        Verdict::Safe
    } else {
        Verdict::Unsafe
    };
    let mut notes = Vec::new();
    let witness = finding.as_ref().map(|f| witness::build(g, f));
    let suggestion = match &finding {
        None => None,
        Some(_) => match suggest::suggest_with(g, limits) {
            Ok(s) => s,
            Err(Stop::Cancelled) => return Err(Stop::Cancelled),
            Err(Stop::TimeLimit) => {
                notes.push(
                    "no safe alternative is suggested: the time limit passed while looking for one (raise --time-limit)"
                        .into(),
                );
                None
            }
        },
    };
    let (size, users) = Domains::estimate(g, Domains::sufficient(g));
    let (finite, finite_skipped) = if size > FINITE_LIMIT {
        (
            None,
            Some(if size == usize::MAX {
                format!(
                    "the finite alphabet would have more keys than can be counted (limit {FINITE_LIMIT})"
                )
            } else {
                format!("the finite alphabet would have {size} keys (limit {FINITE_LIMIT})")
            }),
        )
    } else if users > finite::MAX_USERS {
        (None, Some(format!("more than {} users", finite::MAX_USERS)))
    } else {
        let d = Domains::new(g, Domains::sufficient(g));
        match finite::check_with(g, &d, limits) {
            Ok(f) => (Some(f), None),
            Err(Stop::Cancelled) => return Err(Stop::Cancelled),
            Err(Stop::TimeLimit) => (
                None,
                Some(format!(
                    "stopped at the time limit ({size} keys); the verdict is the symbolic check's alone"
                )),
            ),
        }
    };
    Ok(Report {
        verdict,
        witness,
        suggestion,
        finite,
        finite_skipped,
        warnings: warnings(g),
        notes,
    })
}
