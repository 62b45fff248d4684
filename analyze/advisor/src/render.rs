//! Text output: the schema, the plans and the costs.

use std::fmt::Write as _;

use crate::advise::{QueryPlan, Recommendation};
use crate::model::{Attr, Model};
use crate::query::Query;

/// A query as NoSE-like text (`SELECT ... FROM Entity WHERE ...` over the entities of its graph).
pub fn render_query(model: &Model, q: &Query) -> String {
    let names = |it: &mut dyn Iterator<Item = &Attr>| {
        it.map(|a| model.attr_name(*a))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let from = q
        .graph
        .entities
        .iter()
        .map(|e| model.entities[*e].name.as_str())
        .collect::<Vec<_>>()
        .join(" ⋈ ");
    let mut out = format!("SELECT {} FROM {from}", names(&mut q.select.iter()));
    let mut preds: Vec<String> =
        q.eq.iter()
            .map(|a| format!("{} = ?", model.attr_name(*a)))
            .collect();
    preds.extend(
        q.range
            .iter()
            .map(|a| format!("{} > ?", model.attr_name(*a))),
    );
    if !preds.is_empty() {
        let _ = write!(out, " WHERE {}", preds.join(" AND "));
    }
    if !q.order.is_empty() {
        let _ = write!(out, " ORDER BY {}", names(&mut q.order.iter()));
    }
    out
}

fn plan_text(out: &mut String, p: &QueryPlan, indent: &str) {
    for s in &p.steps {
        let _ = write!(
            out,
            "{indent}get {} ({:.0} gets × {:.1} rows",
            s.cf,
            s.gets.max(1.0),
            s.width
        );
        if !s.clustering_bound.is_empty() {
            let _ = write!(out, ", clustering on {}", s.clustering_bound.join(", "));
        }
        let _ = write!(out, ") {:.3} ms", s.cost);
        if !s.filter.is_empty() {
            let _ = write!(out, " → filter {}", s.filter.join(", "));
        }
        if s.sort {
            out.push_str(" → sort");
        }
        out.push('\n');
    }
    if let Some(l) = p.limit {
        let _ = writeln!(out, "{indent}limit {l}");
    }
}

/// The recommendation as text.
pub fn text(r: &Recommendation) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- schema ({} column families, {:.0} bytes estimated, mix `{}`)",
        r.column_families.len(),
        r.total_size_bytes,
        r.mix
    );
    for cf in &r.column_families {
        let _ = writeln!(
            out,
            "-- {} {}  ({:.0} rows, {:.0} bytes)",
            cf.name, cf.triple, cf.rows, cf.size_bytes
        );
        let _ = writeln!(out, "{}\n", cf.cql);
    }
    let _ = writeln!(out, "-- query plans");
    for q in &r.queries {
        statement_line(&mut out, &q.name, q.weight, q.cost, &q.text);
        plan_text(&mut out, q, "    ");
    }
    if !r.updates.is_empty() {
        let _ = writeln!(out, "\n-- update plans");
    }
    for u in &r.updates {
        statement_line(&mut out, &u.name, u.weight, u.cost, &u.text);
        for m in &u.maintain {
            for s in &m.support {
                let _ = writeln!(out, "    support: {}", s.text);
                plan_text(&mut out, s, "      ");
            }
            let what = match (m.deletes, m.inserts) {
                (true, true) => "delete + put",
                (true, false) => "delete",
                _ => "put",
            };
            let _ = writeln!(
                out,
                "    {what} {} ({:.1} rows) {:.3} ms",
                m.cf, m.rows, m.write_cost
            );
        }
    }
    let _ = writeln!(
        out,
        "\n-- weighted cost: queries {:.4} ms + updates {:.4} ms = total {:.4} ms ({} candidates, {} variables, {} constraints)",
        r.query_cost, r.update_cost, r.total_cost, r.candidates, r.variables, r.constraints
    );
    for n in &r.notes {
        let _ = writeln!(out, "-- note: {n}");
    }
    if !r.optimal && r.notes.is_empty() {
        let _ = writeln!(
            out,
            "-- the time limit stopped the solver: the best schema found, not proven optimal"
        );
    }
    out
}

/// A statement's heading line: `NAME (weight W, C ms): TEXT`.
fn statement_line(out: &mut String, name: &str, weight: f64, cost: f64, text: &str) {
    let _ = writeln!(out, "{name} (weight {weight}, {cost:.3} ms): {text}");
}
