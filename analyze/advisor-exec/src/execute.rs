//! Executing a plan step by step on the stored column families.

use std::collections::BTreeMap;
use std::time::Instant;

use tern_advisor::column_family::ColumnFamily;
use tern_advisor::model::{Attr, Model};
use tern_advisor::query::Query;
use tern_advisor::synthetic::Rng;
use tern_core::migrate::CancelFlag;
use tern_core::model::Key;
use tern_core::store::Store;

use crate::data::{Data, Row};
use crate::error::{ExecError, Result};
use crate::layout::{Naming, decode, partition_id};

/// Parameters of one execution: a value per equality attribute, a lower bound per range attribute.
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// `a = v`.
    pub eq: BTreeMap<Attr, i64>,
    /// `a > v`.
    pub range: BTreeMap<Attr, i64>,
}

/// Parameters drawn from the data: each equality attribute takes the value of a random instance,
/// each range keeps about the top 10 % of the values.
pub fn params(model: &Model, data: &Data, q: &Query, rng: &mut Rng) -> Params {
    let mut p = Params::default();
    for a in &q.eq {
        let inst = &data.values[a.entity];
        p.eq.insert(*a, inst[rng.below(inst.len())][a.field]);
    }
    for a in &q.range {
        let max = data.values[a.entity]
            .iter()
            .map(|v| v[a.field])
            .max()
            .unwrap_or(0);
        let _ = model;
        p.range.insert(*a, max - max / 10 - 1);
    }
    p
}

/// Executes a plan (the column families of its steps, in order): returns the rows of the answer
/// before `LIMIT`, one per combination of the query's entities. `naming` says how the stored
/// rows name their columns.
///
/// # Errors
/// The store fails, or a step's partition key is not known.
pub async fn execute(
    store: &dyn Store,
    kinds: &[String],
    cfs: &[&ColumnFamily],
    p: &Params,
    naming: &Naming,
) -> Result<Vec<Row>> {
    let mut current: Vec<Row> = vec![Row::new()];
    for (cf, kind) in cfs.iter().zip(kinds) {
        let mut next = Vec::new();
        let mut cache: BTreeMap<String, Vec<Row>> = BTreeMap::new();
        for row in &current {
            let id = partition_id(cf, |a| row.get(&a).or_else(|| p.eq.get(&a)).copied())
                .ok_or_else(|| ExecError::UnknownPartitionKey(kind.clone()))?;
            if !cache.contains_key(&id) {
                let rows = match store.get(&Key::new(kind.as_str(), id.clone())?).await? {
                    Some(e) => decode(e.value.get("rows"), naming),
                    None => Vec::new(),
                };
                cache.insert(id.clone(), rows);
            }
            for r in cache.get(&id).into_iter().flatten() {
                let ok = r.iter().all(|(a, v)| {
                    row.get(a).is_none_or(|x| x == v)
                        && p.eq.get(a).is_none_or(|x| x == v)
                        && p.range.get(a).is_none_or(|x| v > x)
                });
                if ok {
                    let mut m = row.clone();
                    m.extend(r.iter().map(|(a, v)| (*a, *v)));
                    next.push(m);
                }
            }
        }
        current = next;
    }
    Ok(current)
}

/// A plan to execute: per step, the kind holding its column family and the column family.
pub type Plan<'a> = Vec<(String, &'a ColumnFamily)>;

/// The measured mean response time of each query under one schema.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Per query (in workload order): mean ms per execution, and mean answer rows.
    pub per_query: Vec<Option<(f64, f64)>>,
}

/// Times `runs` executions of each plan (a plan `None`: the query has no plan in the schema).
/// `None`: `cancel` was set.
///
/// # Errors
/// The store fails.
pub async fn time_plans(
    store: &dyn Store,
    model: &Model,
    data: &Data,
    queries: &[(&Query, Option<Plan<'_>>)],
    runs: usize,
    seed: u64,
    cancel: &CancelFlag,
) -> Result<Option<Measured>> {
    let mut per_query = Vec::new();
    for (i, (q, plan)) in queries.iter().enumerate() {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let Some(plan) = plan else {
            per_query.push(None);
            continue;
        };
        let kinds: Vec<String> = plan.iter().map(|(k, _)| k.clone()).collect();
        let cfs: Vec<&ColumnFamily> = plan.iter().map(|(_, c)| *c).collect();
        // The same parameters for every schema: the generator is seeded per query.
        let mut rng = Rng::new(seed.wrapping_add(i as u64 * 7919));
        let mut total = 0.0;
        let mut rows = 0usize;
        for _ in 0..runs {
            let p = params(model, data, q, &mut rng);
            let start = Instant::now();
            let answer = execute(store, &kinds, &cfs, &p, &Naming::Indices).await?;
            total += start.elapsed().as_secs_f64() * 1000.0;
            rows += answer.len();
        }
        per_query.push(Some((total / runs as f64, rows as f64 / runs as f64)));
    }
    Ok(Some(Measured { per_query }))
}
