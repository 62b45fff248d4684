//! The paper's examples ([MC], seed 003), reproduced exactly.

use tern_contention::finite::{self, Domains, Tree, accepts_schema, run_schema, run_writes};
use tern_contention::{Verdict, analyze, parse};

const DECLS: &str = "key users(user)
key articles(user, article)
key comments(user, article)
domain user = Alice, Bob, Charlie, Dave, Eve
domain article = a1, a2
";

const PUTS: &str = "put_u(users(u), v)
put_u(articles(u, a), v)
put_u(comments(u, a), v)
";

const DELS: &str = "del_u(users(u))
del_u(articles(u, a))
del_u(comments(u, a))
";

/// Example 2: the article-oriented schema, productions (1)-(4).
fn example2() -> String {
    format!(
        "{DECLS}root ::= users(u')
users(u) ::= articles(u, a')*
articles(u, a) ::= comments(u', a)*
comments(u, a) ::= eps
{PUTS}"
    )
}

/// Example 8 as printed: a user's children are all articles or all comments.
fn example8_literal() -> String {
    format!(
        "{DECLS}root ::= users(u')
users(u) ::= articles(u, a')* | comments(u, a')*
articles(u, a) ::= eps
comments(u, a) ::= eps
{PUTS}"
    )
}

/// Example 8 as intended: any mix of the user's own articles and comments.
fn example8_intended() -> String {
    user_oriented("eps", PUTS)
}

/// The user-oriented schema of Example 8 (any mix of a user's articles and
/// comments) with `comments` as the comments' production and `writes` as the writes.
fn user_oriented(comments: &str, writes: &str) -> String {
    format!(
        "{DECLS}root ::= users(u')
users(u) ::= (articles(u, a') | comments(u, a'))*
articles(u, a) ::= eps
comments(u, a) ::= {comments}
{writes}"
    )
}

/// Fig. 3(a): Alice's article a1 with comments by Dave and Eve.
fn fig3() -> Tree {
    Tree::node(
        "users",
        &["Alice"],
        vec![Tree::node(
            "articles",
            &["Alice", "a1"],
            vec![
                Tree::node("comments", &["Dave", "a1"], vec![]),
                Tree::node("comments", &["Eve", "a1"], vec![]),
            ],
        )],
    )
}

fn domains(g: &tern_contention::Grammar) -> Domains {
    Domains::new(g, Domains::sufficient(g))
}

#[test]
fn example3_a_s_runs_bottom_up_on_fig3_and_accepts() {
    let g = parse(&example2()).expect("example 2 parses");
    let run = run_schema(&g, &fig3());
    // Fig. 3(b)-(d): leaves first, then the article, then the user (a final state).
    assert_eq!(
        run.children[0].children[0].state.as_deref(),
        Some("q_comments(Dave, a1)")
    );
    assert_eq!(
        run.children[0].children[1].state.as_deref(),
        Some("q_comments(Eve, a1)")
    );
    assert_eq!(
        run.children[0].state.as_deref(),
        Some("q_articles(Alice, a1)")
    );
    assert_eq!(run.state.as_deref(), Some("q_users(Alice)"));
    assert!(accepts_schema(&g, &fig3()));
}

#[test]
fn example6_a_w_is_deterministic_and_rejects_fig3() {
    let g = parse(&example2()).expect("example 2 parses");
    let d = domains(&g);
    let run = run_writes(&g, &d, &fig3());
    assert_eq!(run.children[0].children[0].state, vec!["q_Dave"]);
    assert_eq!(run.children[0].children[1].state, vec!["q_Eve"]);
    // No rule assigns the article a state, so the root gets none either.
    assert!(run.children[0].state.is_empty());
    assert!(!run.accepted());
    let f = finite::check(&g, &d);
    assert_eq!(f.ambiguous, None, "A_w of Example 5 is deterministic");
}

#[test]
fn example7_article_oriented_is_unsafe_with_the_fig3_witness() {
    let g = parse(&example2()).expect("example 2 parses");
    let report = analyze(&example2()).expect("analyses");
    assert_eq!(report.verdict, Verdict::Unsafe);
    let f = report.finite.as_ref().expect("the finite check ran");
    assert_eq!(f.contained, Some(false), "L(A_s) ⊄ L(A_w)");
    let cex = f.counterexample.as_ref().expect("a counterexample");
    assert!(accepts_schema(&g, cex));
    assert!(!run_writes(&g, &domains(&g), cex).accepted());
    let w = report.witness.expect("a witness");
    assert_eq!(w.kind, "two-writers");
    assert_eq!(w.tree.as_ref(), Some(&fig3()), "the witness is Fig. 3(a)");
    assert_eq!(w.users, vec!["Dave", "Eve"]);
    assert!(
        w.responsible
            .iter()
            .any(|r| r.line == 8 && r.text == "articles(u, a) ::= comments(u', a)*"),
        "{:?}",
        w.responsible
    );
}

#[test]
fn example8_user_oriented_is_safe_in_both_readings() {
    for src in [example8_literal(), example8_intended()] {
        let report = analyze(&src).expect("analyses");
        assert_eq!(report.verdict, Verdict::Safe, "{src}");
        let f = report.finite.as_ref().expect("the finite check ran");
        assert_eq!(f.contained, Some(true), "L(A'_s) ⊆ L(A_w)");
        assert!(report.witness.is_none());
    }
    // The readings differ: only the intended one lets a user mix articles and comments.
    let mixed = Tree::node(
        "users",
        &["Bob"],
        vec![
            Tree::node("articles", &["Bob", "a1"], vec![]),
            Tree::node("comments", &["Bob", "a2"], vec![]),
        ],
    );
    let literal = parse(&example8_literal()).expect("parses");
    let intended = parse(&example8_intended()).expect("parses");
    assert!(!accepts_schema(&literal, &mixed));
    assert!(accepts_schema(&intended, &mixed));
    assert!(run_writes(&intended, &domains(&intended), &mixed).accepted());
}

#[test]
fn the_suggestion_for_example2_is_example8_and_rechecks_safe() {
    let report = analyze(&example2()).expect("analyses");
    let s = report.suggestion.expect("a suggestion");
    assert!(s.safe);
    let g = parse(&s.source).expect("the suggestion parses");
    assert!(
        s.source
            .contains("users(u) ::= (articles(u, a') | comments(u, a'))*"),
        "{}",
        s.source
    );
    assert!(s.source.contains("articles(u, a) ::= eps"), "{}", s.source);
    let again = tern_contention::analyze_grammar(&g);
    assert_eq!(again.verdict, Verdict::Safe);
    assert_eq!(again.finite.map(|f| f.safe()), Some(true));
}

#[test]
fn deletes_add_no_rules() {
    let without = parse(&example2()).expect("parses");
    let with = parse(&format!("{}{DELS}", example2())).expect("parses");
    assert_eq!(with.writes.len(), without.writes.len() + 3);
    let d = domains(&without);
    assert_eq!(d, domains(&with));
    for (c, k) in without.keys.iter().enumerate() {
        for u in d.users() {
            for a in &d.0["article"] {
                let vals: Vec<String> = if k.sorts.len() == 1 {
                    vec![u.clone()]
                } else {
                    vec![u.clone(), a.clone()]
                };
                assert_eq!(
                    finite::writers(&without, &d, c, &vals),
                    finite::writers(&with, &d, c, &vals)
                );
            }
        }
    }
    assert_eq!(finite::check(&without, &d), finite::check(&with, &d));
}

#[test]
fn recursive_comments_on_comments() {
    // Replies by anyone nest under the comment they answer: UNSAFE.
    let unsafe_src = user_oriented("comments(u', a)*", PUTS);
    let g = parse(&unsafe_src).expect("parses");
    let r = tern_contention::analyze_grammar(&g);
    assert_eq!(r.verdict, Verdict::Unsafe);
    assert_eq!(r.finite.as_ref().map(|f| f.safe()), Some(false));
    let w = r.witness.expect("witness");
    let t = w.tree.expect("tree");
    assert!(accepts_schema(&g, &t));
    assert!(!run_writes(&g, &domains(&g), &t).accepted());
    let s = r.suggestion.expect("a suggestion");
    assert_eq!(
        tern_contention::analyze(&s.source).map(|r| r.verdict),
        Ok(Verdict::Safe)
    );
    // A user's own notes nested under her own comments: SAFE, recursion and all.
    let safe_src = user_oriented("comments(u, a')*", PUTS);
    let r = analyze(&safe_src).expect("analyses");
    assert_eq!(r.verdict, Verdict::Safe);
    assert_eq!(r.finite.map(|f| f.safe()), Some(true));
}

#[test]
fn a_write_whose_key_does_not_bind_its_writer_makes_a_w_nondeterministic() {
    let src = user_oriented(
        "eps",
        "put_u(users(u))
put_u(articles(u, a))
put_u(comments(v, a))
",
    );
    let r = analyze(&src).expect("analyses");
    assert_eq!(r.verdict, Verdict::Unsafe);
    let f = r.finite.expect("finite ran");
    let (_, users) = f.ambiguous.expect("A_w is nondeterministic");
    assert!(users.len() >= 2);
    let w = r.witness.expect("witness");
    assert_eq!(w.kind, "ambiguous-write");
    assert_eq!(w.users.len(), 2);
    assert_ne!(w.users[0], w.users[1]);
    assert!(r.suggestion.is_none(), "re-rooting cannot fix the writes");
}
