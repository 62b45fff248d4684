//! Text output: the schema, the plans and the costs.

use std::fmt::Write as _;

use crate::advise::{QueryPlan, Recommendation};

mod query;

pub use query::render_query;

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
    let _ = write!(
        out,
        "\n-- weighted cost: queries {:.4} ms + updates {:.4} ms = total {:.4} ms",
        r.query_cost, r.update_cost, r.total_cost
    );
    // A given schema (`--compare`) was not solved for: no program to describe.
    if r.variables > 0 {
        let _ = write!(
            out,
            " ({} candidates, {} variables, {} constraints)",
            r.candidates, r.variables, r.constraints
        );
    }
    out.push('\n');
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

/// `tern advise --compare`: the given schema with its plans (as [`text`] prints a
/// recommendation), then each statement's cost side by side with the recommendation's, then the
/// weighted totals.
pub fn comparison(rec: &Recommendation, given: &crate::advise::Costed, file: &str) -> String {
    let mut out = format!("\n-- your schema ({file})\n");
    let mut yours = text(&given.schema);
    // Its heading says "schema"; the rest is the same report.
    if let Some(rest) = yours.strip_prefix("-- schema ") {
        yours = format!("-- column families {rest}");
    }
    out.push_str(&yours);
    for u in &given.unserved {
        let _ = writeln!(out, "-- not served: {u}");
    }
    let _ = writeln!(
        out,
        "\n-- compared (ms per execution; weighted: × weight)\n{:<28} {:>8} {:>14} {:>14} {:>8}",
        "statement", "weight", "recommended", "yours", "ratio"
    );
    let mut rows: Vec<(&str, f64, f64, Option<f64>)> = Vec::new();
    for q in &rec.queries {
        let y = given
            .schema
            .queries
            .iter()
            .find(|p| p.name == q.name)
            .map(|p| p.cost);
        rows.push((&q.name, q.weight, q.cost, y));
    }
    for u in &rec.updates {
        let y = given
            .schema
            .updates
            .iter()
            .find(|p| p.name == u.name)
            .map(|p| p.cost);
        rows.push((&u.name, u.weight, u.cost, y));
    }
    for (name, w, r, y) in rows {
        match y {
            Some(y) => {
                let ratio = if r > 0.0 {
                    format!("{:.2}x", y / r)
                } else {
                    "-".into()
                };
                let _ = writeln!(out, "{name:<28} {w:>8} {r:>14.4} {y:>14.4} {ratio:>8}");
            }
            None => {
                let _ = writeln!(
                    out,
                    "{name:<28} {w:>8} {r:>14.4} {:>14} {:>8}",
                    "no plan", "-"
                );
            }
        }
    }
    let y = &given.schema;
    let _ = writeln!(
        out,
        "-- weighted cost: recommended {:.4} ms (queries {:.4} + updates {:.4}), {} bytes; yours {:.4} ms (queries {:.4} + updates {:.4}), {} bytes{}",
        rec.total_cost,
        rec.query_cost,
        rec.update_cost,
        rec.total_size_bytes.round(),
        y.total_cost,
        y.query_cost,
        y.update_cost,
        y.total_size_bytes.round(),
        if given.unserved.is_empty() {
            format!(
                " ({:.2}x)",
                y.total_cost / rec.total_cost.max(f64::MIN_POSITIVE)
            )
        } else {
            format!(
                " — without the {} statements it cannot serve",
                given.unserved.len()
            )
        }
    );
    out
}
