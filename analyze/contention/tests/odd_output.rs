//! Output a user would act on, where it used to be false or odd: a repeated
//! domain name, a deep mandatory chain, the headline of an unwritten key,
//! the warning of a grammar without finite groups, and advice that cannot help.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tern_contention::{Verdict, analyze, render};

fn text(src: &str) -> String {
    let g = tern_contention::parse(src).expect("parses");
    render::text(&g, &tern_contention::analyze_grammar(&g))
}

#[test]
fn a_repeated_domain_name_is_an_error_at_its_place() {
    let src = "key users(user)
key posts(user)
domain user = Alice, Bob, Alice
root ::= users(u)
users(u) ::= posts(u')*
posts(u) ::= eps
put_u(users(u))
put_u(posts(u))
";
    let e = analyze(src).expect_err("a repeated name is refused");
    assert!(
        e.to_string()
            .starts_with("3:27: domain `user` names `Alice` twice"),
        "{e}"
    );
}

/// `users(u) ::= k1(u', x')*` and then a chain of `depth` mandatory children.
fn deep_chain(depth: usize) -> String {
    let mut s = String::from("key users(user)\n");
    for i in 1..=depth {
        s.push_str(&format!("key k{i}(user, item)\n"));
    }
    s.push_str("root ::= users(u)\nusers(u) ::= k1(u', x')*\n");
    for i in 1..depth {
        s.push_str(&format!("k{i}(u, x) ::= k{}(u, x')\n", i + 1));
    }
    s.push_str(&format!("k{depth}(u, x) ::= eps\nput_u(users(u))\n"));
    for i in 1..=depth {
        s.push_str(&format!("put_u(k{i}(u, x))\n"));
    }
    s
}

#[test]
fn a_witness_cut_short_says_so() {
    let src = deep_chain(100);
    let r = analyze(&src).unwrap();
    let w = r.witness.as_ref().unwrap();
    assert!(!w.complete, "a cut witness is not labelled whole");
    assert!(w.notes.iter().any(|n| n.contains("cut")), "{:?}", w.notes);
    fn has_cut(t: &tern_contention::Tree) -> bool {
        t.cut || t.children.iter().any(has_cut)
    }
    assert!(has_cut(w.tree.as_ref().unwrap()));
    // The finite check's counterexample (100 levels) is cut at its limit too.
    let cex = r.finite.as_ref().unwrap().counterexample.as_ref().unwrap();
    assert!(has_cut(cex));
    let out = text(&src);
    assert!(out.contains("cut to stay printable"), "{out}");
    assert!(!out.contains("(in L(A_s), not in L(A_w))"), "{out}");
    // A short chain is whole and says so.
    let short = analyze(&deep_chain(5)).unwrap();
    assert!(short.witness.unwrap().complete);
}

#[test]
fn a_contended_node_deep_down_is_shown_from_below_with_a_note() {
    let src =
        tern_contention::synthetic::schema(tern_contention::synthetic::Shape::Chain, 300, true);
    let r = analyze(&src).unwrap();
    let w = r.witness.unwrap();
    assert!(!w.complete);
    assert!(
        w.notes.iter().any(|n| n.contains("levels above")),
        "{:?}",
        w.notes
    );
    assert!(r.suggestion.is_some());
}

#[test]
fn the_headline_of_an_unwritten_key_does_not_speak_of_two_users() {
    let src = "key users(user)
key drafts(user)
root ::= users(u)
users(u) ::= drafts(u)*
drafts(u) ::= eps
put_u(users(u))
";
    let out = text(src);
    assert!(
        out.starts_with("UNSAFE: an entity group contains a key that no update expression writes"),
        "{out}"
    );
    assert!(!out.contains("more than one user"), "{out}");
    assert!(
        out.contains("add an update expression for the key"),
        "{out}"
    );
    assert!(!out.contains("put the user variable in the key"), "{out}");
}

#[test]
fn the_warning_for_a_kind_without_finite_groups_does_not_ask_to_add_it_to_root() {
    let src = "key users(user)
root ::= users(u)
users(u) ::= users(u)
put_u(users(u))
";
    let r = analyze(src).unwrap();
    assert_eq!(r.verdict, Verdict::Safe);
    let w: Vec<String> = r.warnings.iter().map(ToString::to_string).collect();
    assert!(
        w.iter()
            .any(|w| w.contains("no `users` key has a finite valid tree")),
        "{w:?}"
    );
    assert!(!w.iter().any(|w| w.contains("to `root`")), "{w:?}");
}

#[test]
fn advice_for_an_ambiguous_write_fits_the_case() {
    // Any user writes any item, and items have no user argument.
    let no_user_slot = "key users(user)
key items(item)
root ::= users(u) | items(x)
users(u) ::= eps
items(x) ::= eps
put_u(users(u))
put_z(items(x))
";
    let out = text(no_user_slot);
    assert!(
        out.starts_with("UNSAFE: a key can be written by two different users"),
        "{out}"
    );
    assert!(out.contains("has no `user` argument"), "{out}");
    // The key names its user, but an admin writes it too: the user is already in the key.
    let admin_too = "key users(user)
root ::= users(u)
users(u) ::= eps
put_u(users(u))
put_\"admin\"(users(u))
";
    let out = text(admin_too);
    assert!(out.contains("keep one writer per key"), "{out}");
    assert!(!out.contains("put the user variable in the key"), "{out}");
}
