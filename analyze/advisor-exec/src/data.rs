//! Data generated from the model's statistics, and the rows of a column family over it.

use std::collections::{BTreeMap, BTreeSet};

use tern_advisor::column_family::ColumnFamily;
use tern_advisor::model::{Attr, Model};
use tern_advisor::synthetic::Rng;

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

/// The generated data in the normalized layout `tern advise --emit-migration` reads
/// (docs/advisor.md): one kind per entity, named like it; one entity per instance, its id the
/// instance's id; each field a property of the same name (the id included); each N:1
/// relationship a property of the referencing entity, named like the relationship, holding
/// the referenced instance's id.
///
/// # Errors
/// An entity name is not a valid kind.
pub fn normalized(
    model: &Model,
    data: &Data,
) -> Result<Vec<tern_core::model::Entity>, tern_core::model::KeyError> {
    use tern_core::model::{Entity, Key, Map, Value};

    let mut out = Vec::new();
    for (e, ent) in model.entities.iter().enumerate() {
        for (i, values) in data.values[e].iter().enumerate() {
            let mut value: Map = ent
                .fields
                .iter()
                .zip(values)
                .map(|(f, v)| (f.name.clone(), Value::Int(*v)))
                .collect();
            for (r, rel) in model.relationships.iter().enumerate() {
                if rel.from == e {
                    value.insert(rel.name.clone(), Value::Int(data.parent[r][i] as i64));
                }
            }
            out.push(Entity::new(Key::new(ent.name.as_str(), i as i64)?, value));
        }
    }
    Ok(out)
}
