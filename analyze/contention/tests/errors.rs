//! Bad input: clear errors at line:col, never a panic.

use proptest::prelude::*;
use tern_contention::{Verdict, analyze};

fn err(src: &str) -> String {
    match analyze(src) {
        Ok(_) => panic!("expected an error for:\n{src}"),
        Err(e) => e.to_string(),
    }
}

const OK: &str = "key users(user)
key articles(user, article)
root ::= users(u)
users(u) ::= articles(u, a)*
articles(u, a) ::= eps
put_u(users(u))
put_u(articles(u, a))
";

#[test]
fn unknown_key_constructor_names_the_place_and_the_fix() {
    let src = OK.replace("articles(u, a)*", "artikles(u, a)*");
    let e = err(&src);
    assert!(
        e.starts_with("4:14: unknown key constructor `artikles`"),
        "{e}"
    );
    assert!(e.contains("key artikles("), "{e}");
}

#[test]
fn production_for_an_undeclared_symbol() {
    let src = format!("{OK}tags(t) ::= eps\n");
    let e = err(&src);
    assert!(
        e.starts_with("8:1: production for undeclared key `tags`"),
        "{e}"
    );
}

#[test]
fn a_write_to_a_key_the_grammar_never_produces_is_a_warning() {
    let src = format!("key drafts(user)\ndrafts(u) ::= eps\n{OK}put_u(drafts(u))\n");
    let r = analyze(&src).expect("a warning, not an error");
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let w = r.warnings[0].to_string();
    assert!(
        w.starts_with("10:7: put_u(drafts(u)) writes `drafts` keys"),
        "{w}"
    );
    assert_eq!(r.verdict, Verdict::Safe);
}

#[test]
fn empty_grammar() {
    for src in ["", "# nothing\n\n", "key users(user)\nusers(u) ::= eps\n"] {
        let e = err(src);
        assert!(e.contains("empty grammar"), "{e}");
    }
}

#[test]
fn other_mistakes_are_named() {
    let cases = [
        (
            OK.replace("users(u) ::= articles", "users(u, v) ::= articles"),
            "4:1: `users` takes 1 argument(s)",
        ),
        (
            OK.replace("articles(u, a) ::= eps\n", ""),
            "2:1: key `articles` has no production",
        ),
        (
            format!("{OK}users(x) ::= eps\n"),
            "8:1: a second production for `users`",
        ),
        (
            OK.replace("root ::= users(u)", "root ::= users(u) @"),
            "3:19: unexpected character `@`",
        ),
        (
            OK.replace("articles(u, a) ::= eps", "articles(u, u) ::= eps"),
            "5:1: the left side of a production takes distinct variables",
        ),
        (
            OK.replace("put_u(users(u))", "put_a(articles(u, a))"),
            "6:1: variable `a` is used both as a `article` and as a `user`",
        ),
        (
            OK.replace(
                "users(u) ::= articles(u, a)*",
                "users(u) ::= (articles(u, a)*",
            ),
            "expected `)`",
        ),
    ];
    for (src, want) in cases {
        let e = err(&src);
        assert!(e.contains(want), "got {e:?}, want {want:?}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{}users(u){}", "(".repeat(5000), ")".repeat(5000));
    let src = OK.replace("root ::= users(u)", &format!("root ::= {deep}"));
    let e = err(&src);
    assert!(e.contains("nested more than 100 deep"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    /// Arbitrary text, and valid files cut at any point: an answer or an error, never a panic.
    #[test]
    fn never_panics(s in "[a-z_()|*+?,:=\" \n'#ε]{0,80}", cut in 0usize..200) {
        let _ = analyze(&s);
        let cut = cut.min(OK.len());
        let _ = analyze(&OK[..cut]);
    }
}
