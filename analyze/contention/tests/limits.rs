//! Stopping early: every phase polls the caller's cancellation check and the
//! deadline; the verdict needs the symbolic check, the optional phases stop
//! on their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use std::time::Instant;

use tern_contention::finite::{self, Domains};
use tern_contention::synthetic::{Shape, schema};
use tern_contention::{Limits, Stop, Verdict, analyze_with, parse, suggest_with};

#[test]
fn a_cancelled_analysis_stops_with_cancelled() {
    let g = parse(&schema(Shape::Forest, 20_000, true)).unwrap();
    let polls = Cell::new(0u32);
    let cancelled = || {
        polls.set(polls.get() + 1);
        polls.get() > 2
    };
    let limits = Limits::none().with_cancel(&cancelled);
    assert_eq!(analyze_with(&g, &limits).err(), Some(Stop::Cancelled));
    assert_eq!(polls.get(), 3, "stopped at the first poll that said so");
}

#[test]
fn a_deadline_before_the_verdict_gives_no_verdict() {
    let g = parse(&schema(Shape::Forest, 20_000, true)).unwrap();
    let past = Limits::none().with_deadline(Some(Instant::now()));
    assert_eq!(analyze_with(&g, &past).err(), Some(Stop::TimeLimit));
}

#[test]
fn the_optional_phases_poll_too() {
    // The finite cross-check of 15,710 keys and the suggestion's searches.
    let g = parse(&schema(Shape::Tasks, 50, true)).unwrap();
    let d = Domains::new(&g, Domains::sufficient(&g));
    let stop = || true;
    let limits = Limits::none().with_cancel(&stop);
    assert_eq!(
        finite::check_with(&g, &d, &limits).err(),
        Some(Stop::Cancelled)
    );
    let big = parse(&schema(Shape::Chain, 5_000, true)).unwrap();
    assert_eq!(suggest_with(&big, &limits).err(), Some(Stop::Cancelled));
    // Unlimited, both finish: SAFE after the move, and the checks agree.
    let r = analyze_with(&g, &Limits::none()).unwrap();
    assert_eq!(r.verdict, Verdict::Unsafe);
    assert!(r.suggestion.is_some() && r.finite.is_some() && !r.disagreement());
    assert!(r.notes.is_empty());
}
