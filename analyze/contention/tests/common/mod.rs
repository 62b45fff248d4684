//! What the random-schema generators of `agree.rs` and `roundtrip.rs` share:
//! the seeded generator, a key as text and random regular expressions.
//! Each test file keeps its own choice of sorts, names and writes.

// Each test file uses part of it.
#![allow(dead_code)]

/// A small deterministic generator (proptest picks the seed).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// A value in `0..n` (0 when `n` is 0).
    pub(crate) fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    /// One of `v`.
    pub(crate) fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.next(v.len() as u64) as usize]
    }
}

/// Makes an atom for the variables in scope (name and sort index).
pub(crate) type AtomFn<'a> = dyn Fn(&mut Rng, &[(String, usize)]) -> String + 'a;

/// Key constructor `k{c}` applied to `args`: `k2(a, b)`, or `k2` without arguments.
pub(crate) fn key<S: AsRef<str>>(c: usize, args: &[S]) -> String {
    if args.is_empty() {
        format!("k{c}")
    } else {
        let args: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
        format!("k{c}({})", args.join(", "))
    }
}

/// How [`regex`] writes its forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Forms {
    /// Every sequence and choice in parentheses; `?` over any expression.
    Grouped,
    /// Sequences and choices bare (the parser's precedence decides), explicit
    /// groups, and `?` over a comma-separated pair of atoms.
    Bare,
}

/// A random regular expression over atoms, `depth` levels deep at most.
pub(crate) fn regex(
    r: &mut Rng,
    depth: u32,
    scope: &[(String, usize)],
    atom: &AtomFn<'_>,
    forms: Forms,
) -> String {
    let (open, close, kinds) = match forms {
        Forms::Grouped => ("(", ")", 7),
        Forms::Bare => ("", "", 8),
    };
    let sub = |r: &mut Rng| regex(r, depth - 1, scope, atom, forms);
    match if depth == 0 { r.next(2) } else { r.next(kinds) } {
        0 => "eps".into(),
        1 => atom(r, scope),
        2 => format!("{open}{} {}{close}", sub(r), sub(r)),
        3 => format!("{open}{} | {}{close}", sub(r), sub(r)),
        4 => format!("({})*", sub(r)),
        5 => format!("({})+", sub(r)),
        6 if forms == Forms::Bare => format!("({}, {})?", atom(r, scope), atom(r, scope)),
        6 => format!("({})?", sub(r)),
        _ => format!("({})", sub(r)),
    }
}
