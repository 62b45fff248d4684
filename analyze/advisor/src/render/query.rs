//! A query as text (its own file: the advisor's errors name queries too, and
//! `advise.rs` must not depend on the rest of the text output, which renders its plans).

use std::fmt::Write as _;

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
