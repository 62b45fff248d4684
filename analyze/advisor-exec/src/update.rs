//! Executing an update on the stored column families: the support queries of every column family
//! it modifies (their cheapest plans over the schema, run with the query executor), then the
//! writes: each partition touched is read, its rows changed and written back.
//!
//! The rows an update writes are built from its parameters and the support queries' answers
//! ("composite" rows: the parameters joined with each combination of answers that agree on
//! their shared attributes):
//! - `UPDATE`: the stored rows matching a composite get the new values of the fields set (moved to
//!   another partition when a key attribute changes);
//! - `DELETE`, `DISCONNECT`: the stored rows matching a composite are removed;
//! - `INSERT`, `CONNECT`: each composite that carries every attribute of the column family is a
//!   new row.

use std::collections::BTreeMap;
use std::time::Instant;

use tern_advisor::column_family::ColumnFamily;
use tern_advisor::cost::CostModel;
use tern_advisor::model::{Attr, Model};
use tern_advisor::query::{Query, Update, UpdateKind};
use tern_advisor::support::support_queries;
use tern_advisor::synthetic::Rng;
use tern_core::migrate::CancelFlag;
use tern_core::model::{Entity, Key};
use tern_core::store::{Store, Write};

use crate::data::{Data, Row};
use crate::error::Result;
use crate::execute::{Measured, Params, execute};
use crate::layout::{Naming, Written, decode, encode, partition_id};

/// One column family an update modifies in a schema: its kind, its definition, and the support
/// queries with the plan (kinds and column families of its steps) each runs with.
pub struct Maintained<'a> {
    /// The kind holding the column family.
    pub kind: String,
    /// The column family.
    pub cf: &'a ColumnFamily,
    /// The support queries, each with its plan: the kinds and column families of its steps.
    support: Vec<(Query, Vec<(String, &'a ColumnFamily)>)>,
}

/// What an update does to `schema` (kinds and column families): the column families it modifies,
/// with the cheapest plan of each support query over the schema. `None`: a support query has no
/// plan over the schema (the update cannot be maintained there).
pub fn maintained<'a>(
    model: &Model,
    cost: &CostModel,
    u: &Update,
    schema: &[(String, &'a ColumnFamily)],
) -> Option<Vec<Maintained<'a>>> {
    let cfs: Vec<ColumnFamily> = schema.iter().map(|(_, c)| (*c).clone()).collect();
    let mut out = Vec::new();
    for (kind, cf) in schema {
        let Some(sup) = support_queries(model, u, cf) else {
            continue;
        };
        if sup.impossible {
            return None;
        }
        let mut support = Vec::new();
        for q in sup.queries {
            let space = tern_advisor::advise::plan_space(model, cost, &cfs, &q);
            let (_, steps) = space.cheapest(|_| true)?;
            let plan = steps
                .iter()
                .map(|&s| {
                    let j = space.steps[s].cf;
                    (schema[j].0.clone(), schema[j].1)
                })
                .collect();
            support.push((q, plan));
        }
        out.push(Maintained {
            kind: kind.clone(),
            cf,
            support,
        });
    }
    Some(out)
}

/// One execution's parameters: the predicates' values, the ids of the entities connected, the
/// new values of the fields set, the id of an inserted entity. Drawn in a fixed order from `rng`,
/// so both schemas see the same ones.
#[derive(Debug, Clone)]
struct UpdateParams {
    /// Equality values the support queries look up by.
    lookup: Params,
    /// The attributes every written row starts from (INSERT/CONNECT/DISCONNECT: the ids of the
    /// entities connected, the new entity's values; UPDATE/DELETE: the WHERE clause's equalities).
    base: Row,
    /// New values of the fields set.
    set: Row,
}

fn draw(model: &Model, data: &Data, u: &Update, rng: &mut Rng, fresh: i64) -> UpdateParams {
    let mut lookup = Params::default();
    let mut base = Row::new();
    let mut set = Row::new();
    let pick = |rng: &mut Rng, a: Attr| {
        let inst = &data.values[a.entity];
        inst[rng.below(inst.len())][a.field]
    };
    for a in &u.eq {
        let v = pick(rng, *a);
        lookup.eq.insert(*a, v);
        base.insert(*a, v);
    }
    for a in &u.range {
        let max = data.values[a.entity]
            .iter()
            .map(|v| v[a.field])
            .max()
            .unwrap_or(0);
        lookup.range.insert(*a, max - max / 10 - 1);
    }
    for &r in &u.connections {
        let rel = &model.relationships[r];
        for e in [rel.from, rel.to] {
            if u.kind == UpdateKind::Insert && e == u.entity {
                continue;
            }
            let id = Attr::id(e);
            let v = pick(rng, id);
            lookup.eq.insert(id, v);
            base.insert(id, v);
        }
    }
    for a in &u.set {
        let v = if a.is_id() { fresh } else { pick(rng, *a) };
        set.insert(*a, v);
    }
    if u.kind == UpdateKind::Insert {
        base.insert(Attr::id(u.entity), fresh);
        base.extend(set.iter().map(|(a, v)| (*a, *v)));
    }
    UpdateParams { lookup, base, set }
}

/// `a` and `b` agree on the attributes both have.
fn agree(a: &Row, b: &Row) -> bool {
    a.iter().all(|(k, v)| b.get(k).is_none_or(|w| w == v))
}

/// The parameters joined with each combination of the answers that agree with them.
fn composites(base: &Row, answers: &[Vec<Row>]) -> Vec<Row> {
    let mut out = vec![base.clone()];
    for rows in answers {
        let mut next = Vec::new();
        for c in &out {
            for r in rows.iter().filter(|r| agree(r, c)) {
                let mut m = c.clone();
                m.extend(r.iter().map(|(a, v)| (*a, *v)));
                next.push(m);
            }
        }
        out = next;
    }
    out
}

/// Runs one execution of `u` on the schema: returns the rows written (put or removed).
async fn run_once(
    store: &dyn Store,
    u: &Update,
    maintained: &[Maintained<'_>],
    p: &UpdateParams,
    written: &mut Written,
) -> Result<usize> {
    let mut changed = 0;
    // Each distinct support query runs once.
    let mut answers: Vec<(&Query, Vec<Row>)> = Vec::new();
    for m in maintained {
        for (q, plan) in &m.support {
            if answers.iter().any(|(a, _)| *a == q) {
                continue;
            }
            let kinds: Vec<String> = plan.iter().map(|(k, _)| k.clone()).collect();
            let cfs: Vec<&ColumnFamily> = plan.iter().map(|(_, c)| *c).collect();
            let rows = execute(store, &kinds, &cfs, &p.lookup, &Naming::Indices).await?;
            answers.push((q, rows));
        }
    }
    for m in maintained {
        let mine: Vec<Vec<Row>> = m
            .support
            .iter()
            .filter_map(|(q, _)| answers.iter().find(|(a, _)| *a == q))
            .map(|(_, rows)| rows.clone())
            .collect();
        let comps = composites(&p.base, &mine);
        let attrs = m.cf.attrs();
        let only = |r: &Row| -> Row {
            r.iter()
                .filter(|(a, _)| attrs.contains(a))
                .map(|(a, v)| (*a, *v))
                .collect()
        };
        // Partitions touched: where matching rows are (located by the composites), and where new
        // rows go.
        let mut parts: BTreeMap<String, (Vec<Row>, Vec<Row>)> = BTreeMap::new();
        let removes = matches!(
            u.kind,
            UpdateKind::Update | UpdateKind::Delete | UpdateKind::Disconnect
        );
        if removes {
            for c in &comps {
                if let Some(id) = partition_id(m.cf, |a| c.get(&a).copied()) {
                    parts.entry(id).or_default().0.push(only(c));
                }
            }
        }
        if matches!(u.kind, UpdateKind::Insert | UpdateKind::Connect) {
            for c in &comps {
                let row = only(c);
                if row.len() == attrs.len()
                    && let Some(id) = partition_id(m.cf, |a| row.get(&a).copied())
                {
                    parts.entry(id).or_default().1.push(row);
                }
            }
        }
        // UPDATE: the matching rows with the new values, possibly in another partition.
        let mut moved: Vec<Row> = Vec::new();
        let mut stored: BTreeMap<String, Vec<Row>> = BTreeMap::new();
        for (id, (selectors, _)) in &parts {
            let rows = read(store, &m.kind, id).await?;
            if u.kind == UpdateKind::Update {
                for r in rows
                    .iter()
                    .filter(|r| selectors.iter().any(|s| agree(s, r)))
                {
                    let mut n = r.clone();
                    for (a, v) in &p.set {
                        if n.contains_key(a) {
                            n.insert(*a, *v);
                        }
                    }
                    moved.push(n);
                }
            }
            stored.insert(id.clone(), rows);
        }
        for n in moved {
            if let Some(id) = partition_id(m.cf, |a| n.get(&a).copied()) {
                parts.entry(id).or_default().1.push(n);
            }
        }
        let mut batch = Vec::new();
        for (id, (selectors, new)) in parts {
            let mut rows = match stored.remove(&id) {
                Some(r) => r,
                None => read(store, &m.kind, &id).await?,
            };
            let before = rows.len();
            rows.retain(|r| !selectors.iter().any(|s| agree(s, r)));
            changed += before - rows.len() + new.len();
            rows.extend(new);
            rows.sort_by_key(|r| {
                m.cf.clustering
                    .iter()
                    .map(|a| r.get(a).copied())
                    .collect::<Vec<_>>()
            });
            let key = Key::new(m.kind.as_str(), id)?;
            written.0.push(key.clone());
            batch.push(Write::Put(Entity::new(key, encode(rows))));
        }
        if !batch.is_empty() {
            store.write_batch(batch).await?;
        }
    }
    Ok(changed)
}

async fn read(store: &dyn Store, kind: &str, id: &str) -> Result<Vec<Row>> {
    Ok(match store.get(&Key::new(kind, id.to_owned())?).await? {
        Some(e) => decode(e.value.get("rows"), &Naming::Indices),
        None => Vec::new(),
    })
}

/// Times `runs` executions of each update on one schema (`None` in the list: the update cannot
/// be maintained there); per update the mean ms per execution and the mean rows written. The
/// parameters are seeded per update, so every schema sees the same ones. `None`: `cancel` was set.
///
/// # Errors
/// The store fails.
#[allow(clippy::too_many_arguments)]
pub async fn time_updates(
    store: &dyn Store,
    model: &Model,
    data: &Data,
    updates: &[(&Update, Option<Vec<Maintained<'_>>>)],
    runs: usize,
    seed: u64,
    cancel: &CancelFlag,
    written: &mut Written,
) -> Result<Option<Measured>> {
    let mut per_query = Vec::new();
    for (i, (u, maintained)) in updates.iter().enumerate() {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let Some(maintained) = maintained else {
            per_query.push(None);
            continue;
        };
        let mut rng = Rng::new(seed.wrapping_add(i as u64 * 104_729));
        let (mut total, mut rows) = (0.0, 0usize);
        let first_fresh = data.values[u.entity].len() as i64;
        for run in 0..runs {
            let p = draw(model, data, u, &mut rng, first_fresh + run as i64);
            let start = Instant::now();
            rows += run_once(store, u, maintained, &p, written).await?;
            total += start.elapsed().as_secs_f64() * 1000.0;
        }
        per_query.push(Some((total / runs as f64, rows as f64 / runs as f64)));
    }
    Ok(Some(Measured { per_query }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composites_join_answers_that_agree_with_the_parameters() {
        let a = |f: usize| Attr {
            entity: 0,
            field: f,
        };
        let base = Row::from([(a(0), 1)]);
        let answers = vec![
            vec![
                Row::from([(a(0), 1), (a(1), 5)]),
                Row::from([(a(0), 2), (a(1), 6)]),
            ],
            vec![Row::from([(a(2), 7)]), Row::from([(a(2), 8)])],
        ];
        let c = composites(&base, &answers);
        assert_eq!(c.len(), 2);
        assert!(c.iter().all(|r| r[&a(0)] == 1 && r[&a(1)] == 5));
        // No answer: nothing to write.
        assert!(composites(&base, &[Vec::new()]).is_empty());
    }
}
