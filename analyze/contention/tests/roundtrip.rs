//! The printed schema is the schema: `Grammar::to_source` parses back to the
//! same grammar (over generated schemas with primes, constants, quoted
//! domain names and every regular-expression form), and every suggested
//! schema parses back to exactly the schema that was re-checked, which is SAFE.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use tern_contention::{Verdict, analyze_grammar, parse};

mod common;
use common::{Forms, Rng, key, regex};

const SORTS: [&str; 3] = ["user", "item", "tag"];
/// Variable names: plain and primed, as people and the suggester write them.
const VARS: [&str; 6] = ["p", "p'", "p''", "q", "u'", "x"];
/// Domain values, some of which must be quoted to parse back.
const VALUES: [&str; 8] = [
    "Alice",
    "\"Alice Smith\"",
    "Bob",
    "\"eps\"",
    "\"o'brien\"",
    "b2",
    "\"a,b\"",
    "Zoë",
];

/// A random schema in the file format.
fn schema(seed: u64) -> String {
    let mut r = Rng(seed | 1);
    let n = 2 + r.next(4) as usize;
    let sorts: Vec<Vec<usize>> = (0..n)
        .map(|_| {
            let mut v: Vec<usize> = (0..r.next(3)).map(|_| r.next(3) as usize).collect();
            if r.next(2) == 0 && !v.contains(&0) {
                v.push(0);
            }
            v
        })
        .collect();
    let mut s = String::new();
    for (i, ss) in sorts.iter().enumerate() {
        let names: Vec<&str> = ss.iter().map(|&x| SORTS[x]).collect();
        if names.is_empty() {
            s.push_str(&format!("key k{i}\n"));
        } else {
            s.push_str(&format!("key k{i}({})\n", names.join(", ")));
        }
    }
    for sort in SORTS {
        if r.next(2) == 0 {
            let mut vals: Vec<&str> = Vec::new();
            for _ in 0..1 + r.next(4) {
                let v = r.pick(&VALUES);
                if !vals.contains(&v) {
                    vals.push(v);
                }
            }
            s.push_str(&format!("domain {sort} = {}\n", vals.join(", ")));
        }
    }
    // One sort per variable name within a production: name it by sort.
    let var = |r: &mut Rng, sort: usize| {
        let v = r.pick(&VARS);
        let base = v.trim_end_matches('\'');
        format!("{base}{}{}", ["", "i", "t"][sort], &v[base.len()..])
    };
    let atom = |r: &mut Rng, params: &[(String, usize)]| -> String {
        let c = r.next(n as u64) as usize;
        let args: Vec<String> = sorts[c]
            .iter()
            .map(|&x| {
                let same: Vec<&String> = params
                    .iter()
                    .filter(|(_, s)| *s == x)
                    .map(|(v, _)| v)
                    .collect();
                match r.next(4) {
                    0 if !same.is_empty() => same[r.next(same.len() as u64) as usize].clone(),
                    1 => format!("\"c{x}\""),
                    _ => var(r, x),
                }
            })
            .collect();
        key(c, &args)
    };
    s.push_str(&format!(
        "root ::= {}\n",
        regex(&mut r, 1, &[], &atom, Forms::Bare)
    ));
    for (i, ss) in sorts.iter().enumerate() {
        let params: Vec<(String, usize)> = ss
            .iter()
            .enumerate()
            .map(|(j, &x)| (format!("a{j}{}", ["", "'", "''"][j % 3]), x))
            .collect();
        let lhs: Vec<&str> = params.iter().map(|(v, _)| v.as_str()).collect();
        let rhs = regex(&mut r, 3, &params, &atom, Forms::Bare);
        s.push_str(&format!("{} ::= {rhs}\n", key(i, &lhs)));
    }
    for (c, ss) in sorts.iter().enumerate() {
        let args: Vec<String> = ss
            .iter()
            .enumerate()
            .map(|(j, &x)| match r.next(5) {
                0 => format!("\"c{x}\""),
                _ => format!("w{j}"),
            })
            .collect();
        let user = ss
            .iter()
            .position(|&x| x == 0)
            .filter(|&j| args[j].starts_with('w'));
        let writer = match (r.next(5), user) {
            (0, _) => "put_\"c0\"".to_owned(),
            (1, _) => "del_z'".to_owned(),
            (_, Some(j)) => format!("put_w{j}"),
            _ => "put_z".to_owned(),
        };
        s.push_str(&format!("{writer}({})\n", key(c, &args)));
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]
    #[test]
    fn print_then_parse_gives_the_same_schema(seed in any::<u64>()) {
        let src = schema(seed);
        let g = match parse(&src) {
            Ok(g) => g,
            // A name reused with two sorts is refused; nothing to print.
            Err(e) => { prop_assert!(e.message.contains("both as"), "{e}\n{src}"); return Ok(()); }
        };
        let printed = g.to_source();
        let back = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(back.canonical(), g.canonical(), "{}\nprinted:\n{}", src, printed);
        prop_assert!(back.same_schema(&g));
    }

    #[test]
    fn every_suggestion_parses_back_to_the_rechecked_schema(seed in any::<u64>()) {
        let src = schema(seed);
        let Ok(g) = parse(&src) else { return Ok(()) };
        let r = analyze_grammar(&g);
        let Some(s) = &r.suggestion else { return Ok(()) };
        let back = parse(&s.source).map_err(|e| TestCaseError::fail(format!("{e}\n{}", s.source)))?;
        prop_assert_eq!(back.canonical(), s.schema.canonical(), "{}\nsuggested:\n{}", src, s.source);
        let again = analyze_grammar(&back);
        prop_assert_eq!(again.verdict, Verdict::Safe, "{}", s.source);
        prop_assert!(!again.disagreement(), "{}", s.source);
    }
}

#[test]
fn the_generator_gives_suggestions_with_renamed_variables_and_quoted_names() {
    let (mut suggested, mut primed, mut quoted) = (0, 0, 0);
    for seed in 0..600u64 {
        let Ok(g) = parse(&schema(seed * 7919 + 3)) else {
            continue;
        };
        let printed = g.to_source();
        if printed.contains("\"Alice Smith\"") {
            quoted += 1;
        }
        if let Some(s) = analyze_grammar(&g).suggestion {
            suggested += 1;
            if s.source.contains("''") {
                primed += 1;
            }
        }
    }
    assert!(
        suggested > 10 && primed > 3 && quoted > 20,
        "{suggested} {primed} {quoted}"
    );
}

const ARTICLES: &str = "key users(user)
key articles(user, article)
key tags(user, tag)
key comments(user, article)
root ::= users(u)
users(u) ::= (articles(u, x') | tags(u, a'))*
articles(u, a) ::= comments(u', a)*
tags(u, t) ::= eps
comments(u, a) ::= eps
put_u(users(u))
put_u(articles(u, a))
put_u(tags(u, t))
put_u(comments(u, a))
";

#[test]
fn a_moved_variable_does_not_take_a_name_the_target_uses_with_another_sort() {
    // `a'` is a tag in `users`: the moved comment's article must not be `a'`.
    let r = tern_contention::analyze(ARTICLES).unwrap();
    let s = r.suggestion.expect("a suggestion");
    assert!(
        s.source.contains("comments(u, a'')"),
        "the moved child keeps its own variable:\n{}",
        s.source
    );
    let back = parse(&s.source).expect("the suggestion parses");
    assert_eq!(back.canonical(), s.schema.canonical());
}

#[test]
fn two_variables_of_a_moved_child_stay_two() {
    // A note on two items, written by the admin: it becomes a root of its
    // own, and `p` (bound before) and `p'` (free) must not both become `p'`.
    let src = "key users(user)
key items(user, item)
key notes(item, item)
root ::= users(u)
users(u) ::= items(u, p')*
items(u, p) ::= notes(p, p')*
notes(a, b) ::= eps
put_u(users(u))
put_u(items(u, p))
put_\"admin\"(notes(a, b))
";
    let r = tern_contention::analyze(src).unwrap();
    let s = r.suggestion.expect("a suggestion");
    let back = parse(&s.source).expect("the suggestion parses");
    let notes = back
        .root
        .atoms()
        .into_iter()
        .find(|t| back.name(t.ctor) == "notes")
        .expect("notes is a root now")
        .clone();
    assert_ne!(notes.args[0], notes.args[1], "{}", s.source);
    assert_eq!(back.canonical(), s.schema.canonical());
}

#[test]
fn quoted_domain_names_are_printed_quoted() {
    let src = ARTICLES.replace(
        "root ::=",
        "domain user = \"Alice Smith\", Bob, \"eps\"\nroot ::=",
    );
    let r = tern_contention::analyze(&src).unwrap();
    let s = r.suggestion.expect("a suggestion");
    assert!(
        s.source
            .contains("domain user = \"Alice Smith\", Bob, \"eps\""),
        "{}",
        s.source
    );
    let back = parse(&s.source).expect("the suggestion parses");
    assert_eq!(back.domains["user"], vec!["Alice Smith", "Bob", "eps"]);
}

#[test]
fn same_schema_tells_different_schemas_apart() {
    let a = parse(ARTICLES).unwrap();
    for (from, to) in [
        ("comments(u', a)*", "comments(u', a)+"),
        ("comments(u', a)*", "comments(u'', a)*"),
        ("put_u(tags(u, t))", "del_u(tags(u, t))"),
        ("tags(u, t) ::= eps", "tags(v, t) ::= eps"),
    ] {
        let b = parse(&ARTICLES.replace(from, to)).unwrap();
        assert!(!a.same_schema(&b), "{from} -> {to}");
        assert_ne!(a.canonical(), b.canonical(), "{from} -> {to}");
    }
    // Places and spacing do not matter.
    let c = parse(&ARTICLES.replace("root ::= users(u)", "\n\nroot ::=   users(u)")).unwrap();
    assert!(a.same_schema(&c));
}
