//! Generated schemas for the benchmark and the tests of big inputs
//! (`cargo bench -p tern-contention --bench scaling`, docs/contention.md).

use std::fmt::Write as _;

/// The shape of a generated schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A four-level hierarchy with keys of up to four parts and nested
    /// sub-tasks (`users → projects → tasks → subtasks → subtasks ...`),
    /// plus two-part kinds under `users` up to the number of kinds: the
    /// finite cross-check runs at every size up to 50 kinds.
    Tasks,
    /// A binary tree of kinds `k1 ... kN` of two-part keys under `users`
    /// (wide and shallow).
    Forest,
    /// A chain of kinds, each with exactly one mandatory child (deep: the
    /// smallest group is as deep as the chain).
    Chain,
}

/// A schema of `kinds` key kinds in the file format. `contended`: the
/// deepest edge is written by another user than its parent (UNSAFE).
pub fn schema(shape: Shape, kinds: usize, contended: bool) -> String {
    match shape {
        Shape::Tasks => tasks(kinds.max(1), contended),
        Shape::Forest => forest(kinds.max(2), contended),
        Shape::Chain => chain(kinds.max(2), contended),
    }
}

fn tasks(kinds: usize, contended: bool) -> String {
    const LEVELS: [(&str, &str, &str); 4] = [
        ("users", "user", "u"),
        ("projects", "user, project", "u, p"),
        ("tasks", "user, project, task", "u, p, t"),
        ("subtasks", "user, project, task, sub", "u, p, t, s"),
    ];
    let levels = kinds.min(4);
    let extra = kinds - levels;
    let mut s = String::new();
    for (name, sorts, _) in &LEVELS[..levels] {
        let _ = writeln!(s, "key {name}({sorts})");
    }
    for i in 1..=extra {
        let _ = writeln!(s, "key e{i}(user, project)");
    }
    let _ = writeln!(s, "root ::= users(u)");
    // The children of each level: the next level, written by the parent's
    // user (or, for the contended edge, by any user u').
    let child = |level: usize| -> String {
        let writer = if contended && level + 1 == levels - 1 {
            "u'"
        } else {
            "u"
        };
        match level + 1 {
            1 => format!("projects({writer}, p')"),
            2 => format!("tasks({writer}, p, t')"),
            _ => format!("subtasks({writer}, p, t, s')"),
        }
    };
    for (level, (name, _, params)) in LEVELS[..levels].iter().enumerate() {
        let mut alts: Vec<String> = Vec::new();
        if level + 1 < levels {
            alts.push(child(level));
        }
        if level == 3 {
            alts.push("subtasks(u, p, t, s')".into());
        }
        if level == 0 {
            alts.extend((1..=extra).map(|i| format!("e{i}(u, p')")));
        }
        let rhs = if alts.is_empty() {
            "eps".to_owned()
        } else {
            format!("({})*", alts.join(" | "))
        };
        let _ = writeln!(s, "{name}({params}) ::= {rhs}");
    }
    if contended && levels == 1 {
        // One kind: contention needs a second writer of the one key.
        let _ = writeln!(s, "put_\"admin\"(users(u))");
    }
    for i in 1..=extra {
        let _ = writeln!(s, "e{i}(u, p) ::= eps");
    }
    for (name, _, params) in &LEVELS[..levels] {
        let _ = writeln!(s, "put_u({name}({params}))");
    }
    for i in 1..=extra {
        let _ = writeln!(s, "put_u(e{i}(u, p))");
    }
    s
}

fn forest(kinds: usize, contended: bool) -> String {
    let n = kinds - 1;
    let mut s = String::from("key users(user)\n");
    for i in 1..=n {
        let _ = writeln!(s, "key k{i}(user, item)");
    }
    s.push_str("root ::= users(u)\n");
    let atom = |i: usize| {
        let w = if contended && i == n { "u'" } else { "u" };
        format!("k{i}({w}, x')")
    };
    // k_i's children are k_{2i} and k_{2i+1}; users is k_0's place with child k1.
    let _ = writeln!(s, "users(u) ::= {}*", atom(1));
    for i in 1..=n {
        let kids: Vec<String> = [2 * i, 2 * i + 1]
            .into_iter()
            .filter(|&c| c <= n)
            .map(atom)
            .collect();
        let rhs = if kids.is_empty() {
            "eps".to_owned()
        } else {
            format!("({})*", kids.join(" | "))
        };
        let _ = writeln!(s, "k{i}(u, x) ::= {rhs}");
    }
    s.push_str("put_u(users(u))\n");
    for i in 1..=n {
        let _ = writeln!(s, "put_u(k{i}(u, x))");
    }
    s
}

fn chain(kinds: usize, contended: bool) -> String {
    let n = kinds - 1;
    let mut s = String::from("key users(user)\n");
    for i in 1..=n {
        let _ = writeln!(s, "key k{i}(user, item)");
    }
    s.push_str("root ::= users(u)\nusers(u) ::= k1(u, x')*\n");
    for i in 1..=n {
        let rhs = if i == n {
            "eps".to_owned()
        } else {
            let w = if contended && i + 1 == n { "u'" } else { "u" };
            format!("k{}({w}, x')", i + 1)
        };
        let _ = writeln!(s, "k{i}(u, x) ::= {rhs}");
    }
    s.push_str("put_u(users(u))\n");
    for i in 1..=n {
        let _ = writeln!(s, "put_u(k{i}(u, x))");
    }
    s
}
