//! Emission of the tern migration that builds the recommended column families from a store that
//! holds the entities normalized.
//!
//! Assumed existing layout (documented in docs/advisor.md): one kind per entity, named like the
//! entity; each field a property of the same name, the id included; each N:1 relationship a property
//! named like the relationship that holds the referenced entity's id.
//!
//! A column family whose graph has a *root* entity (every edge, walked away from the root, follows a
//! foreign key) has one row per root entity: it is built by `copy` statements that denormalize the
//! other entities' attributes into the root's kind, hop by hop. Column families of one entity need
//! no data change. Others (rows made by a 1:N expansion) cannot be expressed in the evolution
//! language; the script says so in a comment. `advise_schema.cql` holds the CREATE TABLE statements.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::advise::Recommendation;
use crate::column_family::ColumnFamily;
use crate::error::{AdvisorError, Result};
use crate::model::Model;

/// The root entity of a column family's graph, if it has one.
pub fn root(model: &Model, cf: &ColumnFamily) -> Option<usize> {
    cf.graph
        .entities
        .iter()
        .copied()
        .find(|&r| hops(model, cf, r).len() + 1 == cf.graph.entities.len())
}

/// The foreign-key hops from `root` outward: (holder, relationship, referenced), breadth first.
/// Shorter than the graph's edges when some edge points towards the root.
fn hops(model: &Model, cf: &ColumnFamily, root: usize) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::from([root]);
    let mut queue = VecDeque::from([root]);
    while let Some(e) = queue.pop_front() {
        for r in cf.graph.edges_at(model, e) {
            let rel = &model.relationships[r];
            if rel.from == e && seen.insert(rel.to) {
                out.push((e, r, rel.to));
                queue.push_back(rel.to);
            }
        }
    }
    out
}

/// The `copy` statements (and comments) that build `cf` in the root's kind.
pub fn statements(model: &Model, cf: &ColumnFamily, name: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "-- {name} {}", cf.triple(model));
    if cf.graph.entities.len() == 1 {
        let e = &model.entities[*cf.graph.entities.iter().next().unwrap_or(&0)];
        let _ = writeln!(
            out,
            "-- rows are the `{}` entities as they are: no data change",
            e.name
        );
        return out;
    }
    let Some(r) = root(model, cf) else {
        let _ = writeln!(
            out,
            "-- not expressible in the evolution language: its rows come from a 1:N expansion; load it from the join"
        );
        return out;
    };
    let root_kind = &model.entities[r].name;
    let mut present: BTreeSet<String> = model.entities[r]
        .fields
        .iter()
        .map(|f| f.name.clone())
        .collect();
    present.extend(
        model
            .relationships
            .iter()
            .filter(|x| x.from == r)
            .map(|x| x.name.clone()),
    );
    // The property of the root kind that holds each reached entity's id.
    let mut id_prop: Vec<Option<String>> = vec![None; model.entities.len()];
    for (holder, rel, target) in hops(model, cf, r) {
        let fk = model.relationships[rel].name.clone();
        let holder_kind = &model.entities[holder].name;
        if holder != r {
            // Bring the holder's foreign key into the root first.
            let Some(via) = id_prop[holder].clone() else {
                continue;
            };
            let via_entity = &model.entities[holder];
            if present.insert(fk.clone()) {
                let _ = writeln!(
                    out,
                    "copy {holder_kind}.{fk} to {root_kind} where {holder_kind}.{} = {root_kind}.{via}",
                    via_entity.fields[0].name
                );
            } else {
                let _ = writeln!(out, "-- skipped: {root_kind} already has a property `{fk}`");
                continue;
            }
        }
        id_prop[target] = Some(fk.clone());
        let target_e = &model.entities[target];
        for a in cf
            .attrs()
            .into_iter()
            .filter(|a| a.entity == target && !a.is_id())
        {
            let field = &model.attr(a).name;
            if present.insert(field.clone()) {
                let _ = writeln!(
                    out,
                    "copy {}.{field} to {root_kind} where {}.{} = {root_kind}.{fk}",
                    target_e.name, target_e.name, target_e.fields[0].name
                );
            } else {
                let _ = writeln!(
                    out,
                    "-- skipped: {root_kind} already has a property `{field}`"
                );
            }
        }
    }
    if !out.lines().any(|l| l.starts_with("copy ")) {
        let _ = writeln!(
            out,
            "-- rows are the `{root_kind}` entities with the ids they hold: no data change"
        );
    }
    out
}

/// Writes `NNNN_advise.tern` (the next free number in `dir`) and `advise_schema.cql` into `dir`.
/// The script is left out when no column family needs a data change.
pub fn emit(model: &Model, rec: &Recommendation, dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |path: &Path, source: std::io::Error| AdvisorError::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut next = 1;
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(n) = name
            .strip_suffix(".tern")
            .and_then(|s| s.split('_').next())
            .and_then(|n| n.parse::<u32>().ok())
        {
            next = next.max(n + 1);
        }
    }
    let mut script = String::from(
        "-- Generated by `tern advise`: builds the recommended column families from the normalized kinds.\n",
    );
    let mut cql =
        String::from("-- Generated by `tern advise`: the recommended column families.\n\n");
    // Each `copy` once: two column families with the same root and entities need the same
    // properties in the root's kind (the second would copy them again for nothing).
    let mut done: BTreeSet<String> = BTreeSet::new();
    for cf in &rec.column_families {
        script.push('\n');
        for line in statements(model, &cf.definition, &cf.name).lines() {
            if line.starts_with("copy ") && !done.insert(line.to_string()) {
                let _ = writeln!(script, "-- (built above) {line}");
            } else {
                script.push_str(line);
                script.push('\n');
            }
        }
        let _ = writeln!(cql, "-- {} {}\n{}\n", cf.name, cf.triple, cf.cql);
    }
    let mut written = Vec::new();
    let cql_path = dir.join("advise_schema.cql");
    std::fs::write(&cql_path, cql).map_err(|e| io(&cql_path, e))?;
    written.push(cql_path);
    if script.lines().any(|l| l.starts_with("copy ")) {
        let path = dir.join(format!("{next:04}_advise.tern"));
        std::fs::write(&path, script).map_err(|e| io(&path, e))?;
        written.push(path);
    }
    Ok(written)
}
