//! `tern advise --execute STORE_URL`: runs the workload's queries through their plans on a store,
//! for the recommended schema and for the normalized baseline (one column family per entity, one
//! key-only column family per relationship direction, and key-only indexes on the fields of
//! equality predicates), on the same data generated from the model's statistics.
//!
//! A column family is stored as one entity per partition (kind `advise_rec_N` or `advise_base_N`,
//! id the partition key's values joined by `:`), its rows an array of maps sorted by the
//! clustering key. A plan is executed step by step: each get's partition key comes from the
//! query's parameters and the rows of the previous step; rows are joined on the attributes they
//! share and filtered by the query's predicates on the client. Updates are not executed.
//!
//! The kinds are a scratch namespace of the run (`tern_advise_exec_<pid>_<ms>_...`): every key
//! written is recorded and deleted at the end, also after an error or an interrupt; the CLI says
//! how many it removed, or what it left.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::Context;
use tern_advisor::column_family::ColumnFamily;
use tern_advisor::graph::QueryGraph;
use tern_advisor::model::{Attr, Model};
use tern_advisor::query::Query;
use tern_advisor::synthetic::Rng;
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};

/// One generated row: attribute values (all integers).
pub type Row = BTreeMap<Attr, i64>;

/// Generated instances of every entity.
#[derive(Debug, Clone)]
pub struct Data {
    /// Per entity, per instance: the value of every field (field 0: the id, the instance's index).
    pub values: Vec<Vec<Vec<i64>>>,
    /// Per relationship: the parent (`to`) instance of each child (`from`) instance.
    pub parent: Vec<Vec<usize>>,
    /// Per relationship: the children of each parent instance.
    pub children: Vec<Vec<Vec<usize>>>,
}

/// Generates data from the model's statistics, scaled so the largest entity has `max_rows`
/// instances: counts and distinct values scale alike, values are uniform, each child gets a
/// uniform parent.
pub fn generate(model: &Model, max_rows: usize, seed: u64) -> Data {
    let mut rng = Rng::new(seed);
    let largest = model
        .entities
        .iter()
        .map(|e| e.count)
        .fold(1.0_f64, f64::max);
    let scale = (max_rows as f64 / largest).min(1.0);
    let n: Vec<usize> = model
        .entities
        .iter()
        .map(|e| ((e.count * scale).round() as usize).max(1))
        .collect();
    let values = model
        .entities
        .iter()
        .enumerate()
        .map(|(e, ent)| {
            (0..n[e])
                .map(|i| {
                    ent.fields
                        .iter()
                        .enumerate()
                        .map(|(f, field)| {
                            if f == 0 {
                                i as i64
                            } else {
                                let d = ((field.distinct * scale).round() as usize).max(1);
                                rng.below(d) as i64
                            }
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut parent = Vec::new();
    let mut children = Vec::new();
    for r in &model.relationships {
        let p: Vec<usize> = (0..n[r.from]).map(|_| rng.below(n[r.to])).collect();
        let mut c = vec![Vec::new(); n[r.to]];
        for (child, &par) in p.iter().enumerate() {
            c[par].push(child);
        }
        parent.push(p);
        children.push(c);
    }
    Data {
        values,
        parent,
        children,
    }
}

/// The rows of a column family: the join of its graph's entities along its edges, projected on
/// its attributes.
pub fn cf_rows(model: &Model, data: &Data, cf: &ColumnFamily) -> Vec<Row> {
    let Some(&start) = cf.graph.entities.iter().next() else {
        return Vec::new();
    };
    let add = |row: &mut Row, e: usize, i: usize| {
        for (f, v) in data.values[e][i].iter().enumerate() {
            row.insert(
                Attr {
                    entity: e,
                    field: f,
                },
                *v,
            );
        }
    };
    let mut rows: Vec<Row> = (0..data.values[start].len())
        .map(|i| {
            let mut r = Row::new();
            add(&mut r, start, i);
            r
        })
        .collect();
    let mut seen: BTreeSet<usize> = BTreeSet::from([start]);
    loop {
        let next = cf.graph.edges.iter().copied().find(|&r| {
            let rel = &model.relationships[r];
            seen.contains(&rel.from) != seen.contains(&rel.to)
        });
        let Some(r) = next else { break };
        let rel = &model.relationships[r];
        let mut out = Vec::new();
        if seen.contains(&rel.from) {
            for mut row in rows {
                let child = row[&Attr::id(rel.from)] as usize;
                add(&mut row, rel.to, data.parent[r][child]);
                out.push(row);
            }
            seen.insert(rel.to);
        } else {
            for row in rows {
                let par = row[&Attr::id(rel.to)] as usize;
                for &child in &data.children[r][par] {
                    let mut x = row.clone();
                    add(&mut x, rel.from, child);
                    out.push(x);
                }
            }
            seen.insert(rel.from);
        }
        rows = out;
    }
    let keep = cf.attrs();
    for row in &mut rows {
        row.retain(|a, _| keep.contains(a));
    }
    rows
}

fn attr_key(a: Attr) -> String {
    format!("{}.{}", a.entity, a.field)
}

fn partition_id(cf: &ColumnFamily, values: impl Fn(Attr) -> Option<i64>) -> Option<String> {
    let parts: Option<Vec<String>> = cf
        .key
        .iter()
        .map(|a| values(*a).map(|v| v.to_string()))
        .collect();
    parts.map(|p| p.join(":"))
}

/// Writes a column family's rows into `kind`, one entity per partition, adding each key to `written`
/// before it is written.
///
/// # Errors
/// The store fails.
pub async fn load(
    store: &dyn Store,
    kind: &str,
    cf: &ColumnFamily,
    rows: Vec<Row>,
    written: &mut Written,
) -> anyhow::Result<()> {
    let mut parts: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for row in rows {
        if let Some(id) = partition_id(cf, |a| row.get(&a).copied()) {
            parts.entry(id).or_default().push(row);
        }
    }
    let mut batch = Vec::new();
    for (id, mut rows) in parts {
        rows.sort_by_key(|r| {
            cf.clustering
                .iter()
                .map(|a| r.get(a).copied())
                .collect::<Vec<_>>()
        });
        let array = rows
            .into_iter()
            .map(|r| {
                Value::Map(
                    r.into_iter()
                        .map(|(a, v)| (attr_key(a), Value::Int(v)))
                        .collect(),
                )
            })
            .collect();
        let key = Key::new(kind, id)?;
        written.0.push(key.clone());
        batch.push(Write::Put(Entity::new(
            key,
            Map::from([("rows".to_owned(), Value::Array(array))]),
        )));
        if batch.len() >= 500 {
            store.write_batch(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        store.write_batch(batch).await?;
    }
    Ok(())
}

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
/// before `LIMIT`, one per combination of the query's entities.
///
/// # Errors
/// The store fails, or a step's partition key is not known.
pub async fn execute(
    store: &dyn Store,
    kinds: &[String],
    cfs: &[&ColumnFamily],
    p: &Params,
) -> anyhow::Result<Vec<Row>> {
    let mut current: Vec<Row> = vec![Row::new()];
    for (cf, kind) in cfs.iter().zip(kinds) {
        let mut next = Vec::new();
        let mut cache: BTreeMap<String, Vec<Row>> = BTreeMap::new();
        for row in &current {
            let id = partition_id(cf, |a| row.get(&a).or_else(|| p.eq.get(&a)).copied())
                .context("a plan step's partition key is not known")?;
            if !cache.contains_key(&id) {
                let rows = match store.get(&Key::new(kind.as_str(), id.clone())?).await? {
                    Some(e) => decode(e.value.get("rows")),
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

fn decode(v: Option<&Value>) -> Vec<Row> {
    let Some(Value::Array(rows)) = v else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| match r {
            Value::Map(m) => Some(
                m.iter()
                    .filter_map(|(k, v)| {
                        let (e, f) = k.split_once('.')?;
                        let a = Attr {
                            entity: e.parse().ok()?,
                            field: f.parse().ok()?,
                        };
                        match v {
                            Value::Int(i) => Some((a, *i)),
                            _ => None,
                        }
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// The normalized baseline for a workload's queries: per entity `[id][][fields]`; per
/// relationship `[child id][][parent id]` and `[parent id][child id][]`; per non-id attribute of
/// an equality predicate `[attr][id][]`.
pub fn baseline(model: &Model, queries: &[&Query]) -> Vec<ColumnFamily> {
    let mut out: Vec<ColumnFamily> = Vec::new();
    let mut push = |cf: ColumnFamily| {
        if !out.contains(&cf) {
            out.push(cf);
        }
    };
    for (e, ent) in model.entities.iter().enumerate() {
        let values = (1..ent.fields.len())
            .map(|f| Attr {
                entity: e,
                field: f,
            })
            .collect();
        push(ColumnFamily::new(
            BTreeSet::from([Attr::id(e)]),
            Vec::new(),
            values,
            QueryGraph::single(e),
        ));
    }
    for (r, rel) in model.relationships.iter().enumerate() {
        let graph = QueryGraph {
            entities: BTreeSet::from([rel.from, rel.to]),
            edges: BTreeSet::from([r]),
        };
        push(ColumnFamily::new(
            BTreeSet::from([Attr::id(rel.from)]),
            Vec::new(),
            BTreeSet::from([Attr::id(rel.to)]),
            graph.clone(),
        ));
        push(ColumnFamily::new(
            BTreeSet::from([Attr::id(rel.to)]),
            vec![Attr::id(rel.from)],
            BTreeSet::new(),
            graph,
        ));
    }
    for q in queries {
        for a in q.eq.iter().filter(|a| !a.is_id()) {
            push(ColumnFamily::new(
                BTreeSet::from([*a]),
                vec![Attr::id(a.entity)],
                BTreeSet::new(),
                QueryGraph::single(a.entity),
            ));
        }
    }
    out
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
    cancel: &tern_core::migrate::CancelFlag,
) -> anyhow::Result<Option<Measured>> {
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
            let answer = execute(store, &kinds, &cfs, &p).await?;
            total += start.elapsed().as_secs_f64() * 1000.0;
            rows += answer.len();
        }
        per_query.push(Some((total / runs as f64, rows as f64 / runs as f64)));
    }
    Ok(Some(Measured { per_query }))
}

/// The entities one `--execute` run wrote, to remove them afterwards.
#[derive(Debug, Default)]
pub struct Written(Vec<Key>);

impl Written {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Deletes them all (in batches of 500); returns how many.
    ///
    /// # Errors
    /// The store fails; the ones not deleted stay listed.
    pub async fn remove(&mut self, store: &dyn Store) -> anyhow::Result<usize> {
        let n = self.0.len();
        while !self.0.is_empty() {
            let at = self.0.len().saturating_sub(500);
            let batch: Vec<Write> = self.0[at..].iter().cloned().map(Write::Delete).collect();
            store.write_batch(batch).await?;
            self.0.truncate(at);
        }
        Ok(n)
    }
}

/// Loads the recommended column families and the normalized baseline into kinds `{tag}_rec_cfN`
/// and `{tag}_base_N` (every key written is added to `written`), and times every query's cheapest
/// plan in both. `None`: `cancel` was set (between loads or queries).
///
/// # Errors
/// The store fails, or a recommended column family is not among the candidates.
#[allow(clippy::too_many_arguments)]
pub async fn compare_on(
    store: &dyn Store,
    tag: &str,
    model: &Model,
    prepared: &tern_advisor::advise::Prepared<'_>,
    rec: &tern_advisor::Recommendation,
    opts: &tern_advisor::Options,
    rows: usize,
    runs: usize,
    cancel: &tern_core::migrate::CancelFlag,
    written: &mut Written,
) -> anyhow::Result<Option<Comparison>> {
    let data = generate(model, rows.max(1), 42);
    let mut kind_of: BTreeMap<usize, String> = BTreeMap::new();
    for cf in &rec.column_families {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let j = prepared
            .pool
            .find(&cf.definition)
            .context("a recommended column family is not among the candidates")?;
        let kind = format!("{tag}_rec_{}", cf.name);
        let cf_rows = cf_rows(model, &data, &cf.definition);
        load(store, &kind, &cf.definition, cf_rows, written).await?;
        kind_of.insert(j, kind);
    }
    let queries: Vec<&Query> = prepared.queries.iter().map(|q| &q.3.query).collect();
    let base = baseline(model, &queries);
    for (i, cf) in base.iter().enumerate() {
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let cf_rows = cf_rows(model, &data, cf);
        load(store, &format!("{tag}_base_{i}"), cf, cf_rows, written).await?;
    }
    let mut rec_plans = Vec::new();
    let mut base_plans = Vec::new();
    for (_, _, _, space) in &prepared.queries {
        let plan = space
            .cheapest(|j| kind_of.contains_key(&j))
            .map(|(_, steps)| {
                steps
                    .iter()
                    .map(|&s| {
                        let j = space.steps[s].cf;
                        (
                            kind_of.get(&j).cloned().unwrap_or_default(),
                            &prepared.pool.candidates[j],
                        )
                    })
                    .collect::<Vec<_>>()
            });
        rec_plans.push((&space.query, plan));
        let bspace = tern_advisor::advise::plan_space(model, &opts.cost, &base, &space.query);
        let plan = bspace.cheapest(|_| true).map(|(_, steps)| {
            steps
                .iter()
                .map(|&s| {
                    let i = bspace.steps[s].cf;
                    (format!("{tag}_base_{i}"), &base[i])
                })
                .collect::<Vec<_>>()
        });
        base_plans.push((&space.query, plan));
    }
    let runs = runs.max(1);
    let Some(r) = time_plans(store, model, &data, &rec_plans, runs, 7, cancel).await? else {
        return Ok(None);
    };
    let Some(b) = time_plans(store, model, &data, &base_plans, runs, 7, cancel).await? else {
        return Ok(None);
    };
    Ok(Some(Comparison {
        queries: prepared
            .queries
            .iter()
            .map(|(name, _, w, _)| (name.clone(), *w))
            .collect(),
        recommended: r,
        baseline: b,
    }))
}

/// What [`compare_on`] measured.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// (name, weight) per query.
    pub queries: Vec<(String, f64)>,
    /// The recommended schema.
    pub recommended: Measured,
    /// The normalized baseline.
    pub baseline: Measured,
}
