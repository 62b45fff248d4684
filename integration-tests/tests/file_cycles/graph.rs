//! The file-level import graph of one crate and its cycles.
//!
//! An edge `a.rs -> b.rs` is a real use: a private `use` in `a.rs`, or a path in its
//! code, that names something *defined* in `b.rs`. Paths are followed through
//! re-exports (`pub use`) to the file that defines the item, so a parent `mod.rs` that
//! declares its children and re-exports their items is not an import of them.
//!
//! A module and its own submodules are one unit: a parent's file calling into its
//! children, and the children using what their parent defines, are edges up and down
//! one subtree (the usual `mod.rs` shape), not a circle between two parts. Only edges
//! between files neither of which encloses the other count.

use std::collections::{BTreeMap, BTreeSet};

use crate::modules::Crate;

/// Evidence for one edge: the line in the source file and the path as written.
pub(crate) type Evidence = (usize, String);

/// The file-level import graph: `edges[a][b]` = where `a` names something of `b`.
pub(crate) struct Graph {
    /// File names, by index.
    pub(crate) files: Vec<String>,
    /// Edges with the first reference that made each.
    pub(crate) edges: Vec<BTreeMap<usize, Evidence>>,
}

/// How deep re-exports and globs are followed (a glob cycle would loop).
const MAX_DEPTH: usize = 24;

impl Graph {
    /// Builds the graph of `krate`; file names are shown relative to `base`.
    pub(crate) fn of(krate: &Crate, base: &std::path::Path) -> Graph {
        let files = krate
            .files
            .iter()
            .map(|f| f.strip_prefix(base).unwrap_or(f).display().to_string())
            .collect();
        let mut edges = vec![BTreeMap::new(); krate.files.len()];
        for r in &krate.references {
            let from = krate.modules[r.module].file;
            let resolved = if r.is_glob {
                resolve_module(krate, r.module, &r.segments).map(|m| krate.modules[m].file)
            } else {
                resolve(krate, r.module, &r.segments, 0)
            };
            if let Some(to) = resolved
                && to != from
                && !krate.is_ancestor(to, from)
                && !krate.is_ancestor(from, to)
            {
                let evidence = (r.line, r.segments.join("::"));
                edges[from].entry(to).or_insert(evidence);
            }
        }
        Graph { files, edges }
    }

    /// Every cycle, one per strongly connected component of more than one file, as the
    /// files in order with the evidence of each edge (`a.rs:12 (use crate::b::X) -> b.rs`).
    pub(crate) fn cycles(&self) -> Vec<String> {
        let mut out = Vec::new();
        for component in strongly_connected(&self.edges) {
            if component.len() < 2 {
                continue;
            }
            let members: BTreeSet<usize> = component.iter().copied().collect();
            let start = *members.iter().next().unwrap_or(&0);
            let cycle = self.shortest_cycle(start, &members);
            let mut text = String::new();
            for pair in cycle.windows(2) {
                let (line, path) = &self.edges[pair[0]][&pair[1]];
                text.push_str(&format!("{}:{line} ({path}) -> ", self.files[pair[0]]));
            }
            text.push_str(&self.files[start]);
            if members.len() > cycle.len() - 1 {
                let rest: Vec<&str> = members
                    .iter()
                    .filter(|m| !cycle.contains(m))
                    .map(|m| self.files[*m].as_str())
                    .collect();
                text.push_str(&format!(" [same circle: {}]", rest.join(", ")));
            }
            out.push(text);
        }
        out
    }

    /// The shortest path `start -> ... -> start` inside `members` (breadth first).
    fn shortest_cycle(&self, start: usize, members: &BTreeSet<usize>) -> Vec<usize> {
        let mut previous: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start]);
        while let Some(node) = queue.pop_front() {
            for &next in self.edges[node].keys() {
                if !members.contains(&next) {
                    continue;
                }
                if next == start {
                    let mut path = vec![start];
                    let mut at = node;
                    while at != start {
                        path.push(at);
                        at = previous[&at];
                    }
                    path.push(start);
                    path.reverse();
                    return path;
                }
                if let std::collections::btree_map::Entry::Vacant(e) = previous.entry(next) {
                    e.insert(node);
                    queue.push_back(next);
                }
            }
        }
        vec![start, start]
    }
}

/// The file that defines what `segments`, written in `module`, names; `None` for a
/// name outside the crate (another crate, the prelude, a local variable).
fn resolve(krate: &Crate, module: usize, segments: &[String], depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH || segments.is_empty() {
        return None;
    }
    let (mut current, mut i) = match segments[0].as_str() {
        "crate" => (0, 1),
        "self" => (module, 1),
        "super" => (krate.modules[module].parent?, 1),
        "Self" => return None,
        _ => (module, 0),
    };
    while i < segments.len() && segments[i] == "super" {
        current = krate.modules[current].parent?;
        i += 1;
    }
    let anchored = i > 0;
    while i < segments.len() {
        let name = &segments[i];
        let m = &krate.modules[current];
        if let Some(&child) = m.children.get(name) {
            current = child;
            i += 1;
            continue;
        }
        if let Some(&file) = m.items.get(name) {
            return Some(file);
        }
        let first_unanchored = !anchored && i == 0;
        if let Some((path, _)) = m.imports.get(name) {
            let mut full = path.clone();
            full.extend_from_slice(&segments[i + 1..]);
            return resolve(krate, current, &full, depth + 1);
        }
        for glob in &m.globs {
            if let Some(target) = resolve_module(krate, current, glob)
                && target != current
                && defines(krate, target, name)
            {
                let mut full = glob.clone();
                full.extend_from_slice(&segments[i..]);
                return resolve(krate, current, &full, depth + 1);
            }
        }
        // A name not found: outside the crate (first segment), or made by a macro.
        return if first_unanchored { None } else { Some(m.file) };
    }
    if i == 0 {
        return None;
    }
    Some(krate.modules[current].file)
}

/// Whether `module` has `name` as a child module, an item or an import.
fn defines(krate: &Crate, module: usize, name: &str) -> bool {
    let m = &krate.modules[module];
    m.children.contains_key(name) || m.items.contains_key(name) || m.imports.contains_key(name)
}

/// The module a glob import's path names, if it is one of the crate's.
fn resolve_module(krate: &Crate, module: usize, segments: &[String]) -> Option<usize> {
    let (mut current, mut i) = match segments.first().map(String::as_str) {
        Some("crate") => (0, 1),
        Some("self") => (module, 1),
        Some("super") => (krate.modules[module].parent?, 1),
        _ => (module, 0),
    };
    while i < segments.len() && segments[i] == "super" {
        current = krate.modules[current].parent?;
        i += 1;
    }
    let anchored = i > 0;
    for (n, name) in segments[i..].iter().enumerate() {
        current = match krate.modules[current].children.get(name) {
            Some(&child) => child,
            None if n == 0 && !anchored => return None,
            None => return Some(current),
        };
    }
    Some(current)
}

/// Tarjan's strongly connected components (iterative).
fn strongly_connected(edges: &[BTreeMap<usize, Evidence>]) -> Vec<Vec<usize>> {
    let n = edges.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut counter = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, Vec<usize>)> =
            vec![(root, edges[root].keys().copied().collect())];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some((node, pending)) = work.last_mut() {
            let node = *node;
            if let Some(next) = pending.pop() {
                if index[next] == usize::MAX {
                    index[next] = counter;
                    low[next] = counter;
                    counter += 1;
                    stack.push(next);
                    on_stack[next] = true;
                    work.push((next, edges[next].keys().copied().collect()));
                } else if on_stack[next] {
                    low[node] = low[node].min(index[next]);
                }
                continue;
            }
            work.pop();
            if let Some((parent, _)) = work.last() {
                low[*parent] = low[*parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(top) = stack.pop() {
                    on_stack[top] = false;
                    component.push(top);
                    if top == node {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}
