//! Synthetic workloads on Watts–Strogatz entity graphs, after [NoSE]'s Fig. 19 setup: at scale `s`,
//! `7s` entities, `30s` queries, `3s` updates and `5s` inserts (4x: 28 entities, 120 queries,
//! 12 updates, 20 inserts). Edges get a random direction (the foreign key at the head); statements
//! are random walks with random predicates and attributes. Deterministic for a given seed. Also the
//! [`chain`] family, the enumeration's worst case.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// A small deterministic generator (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() % 10_000) as f64 / 10_000.0 < p
    }
}

/// A generated model and workload, as text in the documented formats.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// The model file.
    pub model: String,
    /// The workload file.
    pub workload: String,
}

/// A chain of `n` entities (at least one; each with one field of 10 distinct values) and one query
/// along all of it, from an equality on the first entity's field to the last entity's field: the
/// worst case of the enumeration (its candidates grow with the square of the chain). The
/// benchmark's `chain` family and the tests of the enumeration's work bound.
pub fn chain(n: usize) -> Synthetic {
    let n = n.max(1);
    let mut model = String::new();
    for i in 0..n {
        let _ = writeln!(
            model,
            "entity E{i} 1000\n  id E{i}Id\n  field E{i}F string 20 distinct 10"
        );
    }
    for i in 1..n {
        let _ = writeln!(model, "fk E{i}.Up -> E{}.Down", i - 1);
    }
    let path: Vec<&str> = std::iter::once("E0")
        .chain(std::iter::repeat_n("Down", n - 1))
        .collect();
    let last = n - 1;
    let workload = format!(
        "Q: SELECT E{last}.E{last}F FROM {} WHERE E0.E0F = ?x;\n",
        path.join(".")
    );
    Synthetic { model, workload }
}

/// Generates the workload at `scale` (1 to 4 in the benchmark).
pub fn generate(scale: usize, seed: u64) -> Synthetic {
    let mut rng = Rng::new(seed);
    let n = 7 * scale;
    let edges = ring(&mut rng, n);
    let mut model = String::new();
    let mut fields: Vec<Vec<String>> = Vec::new();
    let mut counts = Vec::new();
    for e in 0..n {
        let count = 1000 * (1 + rng.below(100));
        counts.push(count);
        let _ = writeln!(model, "entity E{e} {count}\n  id E{e}Id");
        let mut fs = Vec::new();
        for f in 0..(2 + rng.below(4)) {
            let distinct = 1 + rng.below(count);
            let name = format!("E{e}F{f}");
            let _ = writeln!(model, "  field {name} int 8 distinct {distinct}");
            fs.push(name);
        }
        fields.push(fs);
    }
    let (adj, fks) = relationships(&mut rng, &mut model, n, edges);
    let mut workload = String::new();
    // A random path of at most `max_len - 1` steps from a random entity:
    // (its start, its text, the entities on it, its last entity).
    let walk = |rng: &mut Rng, max_len: usize| -> (usize, String, Vec<usize>, usize) {
        let start = rng.below(n);
        let len = rng.below(max_len);
        let mut path = format!("E{start}");
        let mut seen = vec![start];
        let mut at = start;
        for _ in 0..len {
            let options: Vec<&(usize, String)> =
                adj[at].iter().filter(|(t, _)| !seen.contains(t)).collect();
            if options.is_empty() {
                break;
            }
            let (t, name) = options[rng.below(options.len())];
            path.push('.');
            path.push_str(name);
            seen.push(*t);
            at = *t;
        }
        let last = *seen.last().unwrap_or(&start);
        (start, path, seen, last)
    };
    let _ = writeln!(workload, "group Reads default=1");
    for q in 0..30 * scale {
        let (_, path, seen, last) = walk(&mut rng, 4);
        let pick = |rng: &mut Rng, e: usize| -> String {
            let fs = &fields[e];
            format!("E{e}.{}", fs[rng.below(fs.len())])
        };
        let mut select: BTreeSet<String> = BTreeSet::new();
        for _ in 0..(1 + rng.below(3)) {
            select.insert(pick(&mut rng, last));
        }
        let eq_entity = seen[rng.below(seen.len())];
        let mut preds = vec![format!("{} = ?", pick(&mut rng, eq_entity))];
        if rng.chance(0.3) {
            let e = seen[rng.below(seen.len())];
            let a = pick(&mut rng, e);
            if !preds[0].starts_with(&format!("{a} ")) {
                preds.push(format!("{a} > ?"));
            }
        }
        let mut stmt = format!(
            "  Q{q} {}: SELECT {} FROM {path} WHERE {}",
            1 + rng.below(10),
            select.into_iter().collect::<Vec<_>>().join(", "),
            preds.join(" AND ")
        );
        if rng.chance(0.2) {
            let _ = write!(stmt, " ORDER BY {}", pick(&mut rng, last));
        }
        let _ = writeln!(workload, "{stmt};");
    }
    let _ = writeln!(workload, "group Writes default=1");
    for u in 0..3 * scale {
        let (e, path, _, last) = walk(&mut rng, 2);
        let fs = &fields[e];
        let _ = writeln!(
            workload,
            "  U{u} {}: UPDATE E{e} FROM {path} SET {} = ? WHERE E{last}.E{last}Id = ?;",
            1 + rng.below(5),
            fs[rng.below(fs.len())]
        );
    }
    inserts(&mut rng, &mut workload, 5 * scale, &fields, &fks);
    Synthetic { model, workload }
}

/// Adjacency (target, step name) and foreign keys (name, target) per entity.
type Links = (Vec<Vec<(usize, String)>>, Vec<Vec<(String, usize)>>);

/// Relationships along `edges`: random direction, the foreign key on the head; written to `model`.
fn relationships(
    rng: &mut Rng,
    model: &mut String,
    n: usize,
    edges: BTreeSet<(usize, usize)>,
) -> Links {
    let mut adj: Vec<Vec<(usize, String)>> = vec![Vec::new(); n];
    let mut fks: Vec<Vec<(String, usize)>> = vec![Vec::new(); n];
    for (a, b) in edges {
        let (from, to) = if rng.chance(0.5) { (a, b) } else { (b, a) };
        let fk = format!("to{to}");
        let rev = format!("from{from}");
        let _ = writeln!(model, "fk E{from}.{fk} -> E{to}.{rev}");
        adj[from].push((to, fk.clone()));
        adj[to].push((from, rev));
        fks[from].push((fk, to));
    }
    (adj, fks)
}

/// Watts–Strogatz: a ring of `n` nodes where each links to its next 2 neighbours, rewired with
/// p = 0.3; edges as (lower, higher) node pairs.
fn ring(rng: &mut Rng, n: usize) -> BTreeSet<(usize, usize)> {
    let mut edges: BTreeSet<(usize, usize)> = BTreeSet::new();
    for i in 0..n {
        for k in 1..=2 {
            let mut j = (i + k) % n;
            if rng.chance(0.3) {
                j = rng.below(n);
            }
            let (a, b) = (i.min(j), i.max(j));
            if a != b {
                edges.insert((a, b));
            }
        }
    }
    edges
}

/// `count` inserts into random entities, each connected through all of its foreign keys.
fn inserts(
    rng: &mut Rng,
    workload: &mut String,
    count: usize,
    fields: &[Vec<String>],
    fks: &[Vec<(String, usize)>],
) {
    let n = fields.len();
    for i in 0..count {
        let e = rng.below(n);
        let fs = &fields[e];
        let mut stmt = format!(
            "  I{i} {}: INSERT INTO E{e} SET {} = ?",
            1 + rng.below(5),
            fs[0]
        );
        if !fks[e].is_empty() {
            let conns: Vec<String> = fks[e].iter().map(|(fk, _)| format!("{fk}(?)")).collect();
            let _ = write!(stmt, " AND CONNECT TO {}", conns.join(", "));
        }
        let _ = writeln!(workload, "{stmt};");
    }
}
