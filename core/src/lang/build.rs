//! The rows of a `build` statement (a new kind filled by a join; docs/language.md, "build")
//! and its safety check, shared by the reference semantics ([`super::eval`]) and the engine.
//!
//! Each combination of one entity per kind read (`from`, then each `join`) whose join atoms hold
//! is a row; the join rule is that of `move` and `copy` (`a = b` holds when `b`'s value, or an
//! element of it when it is an array, equals `a`'s; an entity lacking either side joins
//! nothing). A row holds its `key`, `cluster` and `select` properties as columns named
//! `kind_property` ([`Build::column_name`]); a property a joined entity lacks is left out of
//! the row. One entity of the new kind per distinct key (its id: the key values joined by `:`,
//! see [`partition_id`]) holds `{"rows": [...]}`, ordered by the cluster columns. Rows lacking a
//! key column belong to no partition and are counted, not written.
//!
//! **Safety.** The result does not depend on the order of the loops exactly when no two rows
//! have the same key and cluster values but different `select` values ([`BuildConflict`]);
//! identical rows are written once.

use std::collections::BTreeMap;

use super::ast::Build;
use crate::model::json::to_json_string;
use crate::model::{Map, Value};
use crate::store::lookup;

/// The property of the new kind's entities that holds their rows.
pub const ROWS: &str = "rows";

/// Two rows of one partition with the same cluster values but different `select` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildConflict {
    /// The partition (entity id).
    pub id: String,
    /// The first row found.
    pub first: Map,
    /// A different row with the same key and cluster values.
    pub second: Map,
}

impl std::fmt::Display for BuildConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "partition {:?}: rows {} and {}",
            self.id,
            to_json_string(&Value::Map(self.first.clone())),
            to_json_string(&Value::Map(self.second.clone()))
        )
    }
}

/// What a `build` computes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Built {
    /// The new kind's entities: (id, value `{"rows": [...]}`), by id.
    pub entities: Vec<(String, Map)>,
    /// Rows written (after removing identical ones).
    pub rows: u64,
    /// Join rows lacking a key column (written nowhere).
    pub without_key: u64,
    /// Conflicts (see the module doc); non-empty means unsafe.
    pub conflicts: Vec<BuildConflict>,
}

/// The text of one key value in an entity id: a string as it is, a number or anything else
/// as its JSON text.
fn id_part(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => to_json_string(other),
    }
}

/// The id of the partition holding `row`: the key columns' values joined by `:`; `None` when
/// the row lacks one.
pub fn partition_id(b: &Build, row: &Map) -> Option<String> {
    let parts: Option<Vec<String>> = b
        .key
        .iter()
        .map(|p| row.get(&Build::column_name(p)).map(id_part))
        .collect();
    parts.map(|p| p.join(":"))
}

/// The index form of a join value: integral floats as integers (`1.0` joins `1`).
fn index_key(v: &Value) -> Value {
    match v {
        Value::Float(f) if f.fract() == 0.0 && *f >= -(2f64.powi(63)) && *f < 2f64.powi(63) => {
            Value::Int(*f as i64)
        }
        other => other.clone(),
    }
}

/// Computes the rows of `b` over the entities of each kind read (`values(kind)`), grouped into
/// the new kind's entities, with the conflicts that make it unsafe.
pub fn build_rows<'a>(b: &Build, values: impl Fn(&str) -> Vec<&'a Map>) -> Built {
    // One entity per kind read, in the order of `b.sources()`.
    let sources = b.sources();
    let mut rows: Vec<Vec<&'a Map>> = values(&b.from).into_iter().map(|m| vec![m]).collect();
    for join in &b.joins {
        let entities = values(&join.kind);
        let mut index: BTreeMap<Value, Vec<usize>> = BTreeMap::new();
        for (i, e) in entities.iter().enumerate() {
            if let Some(v) = lookup(e, &join.new.path) {
                index.entry(index_key(v)).or_default().push(i);
                if let Value::Array(items) = v {
                    for item in items {
                        index.entry(index_key(item)).or_default().push(i);
                    }
                }
            }
        }
        let Some(known_at) = sources.iter().position(|k| *k == join.known.kind) else {
            return Built::default();
        };
        let mut next = Vec::new();
        for row in rows {
            let Some(a) = row.get(known_at).and_then(|m| lookup(m, &join.known.path)) else {
                continue;
            };
            let mut hits = index.get(&index_key(a)).cloned().unwrap_or_default();
            hits.dedup();
            for i in hits {
                let e = entities[i];
                if lookup(e, &join.new.path).is_some_and(|bv| bv.atom_matches(a)) {
                    let mut r = row.clone();
                    r.push(e);
                    next.push(r);
                }
            }
        }
        rows = next;
    }
    let mut built = Built::default();
    // Partition id -> (cluster values -> row).
    let mut parts: BTreeMap<String, BTreeMap<Vec<Option<Value>>, Map>> = BTreeMap::new();
    for row in rows {
        let mut m = Map::new();
        for p in b.columns() {
            let Some(at) = sources.iter().position(|k| *k == p.kind) else {
                continue;
            };
            if let Some(v) = row.get(at).and_then(|e| lookup(e, &p.path)) {
                m.insert(Build::column_name(p), v.clone());
            }
        }
        let Some(id) = partition_id(b, &m) else {
            built.without_key += 1;
            continue;
        };
        let cluster: Vec<Option<Value>> = b
            .cluster
            .iter()
            .map(|p| m.get(&Build::column_name(p)).cloned())
            .collect();
        let part = parts.entry(id.clone()).or_default();
        match part.get(&cluster) {
            Some(existing) if *existing != m => built.conflicts.push(BuildConflict {
                id,
                first: existing.clone(),
                second: m,
            }),
            Some(_) => {}
            None => {
                part.insert(cluster, m);
            }
        }
    }
    for (id, part) in parts {
        built.rows += part.len() as u64;
        let rows = part.into_values().map(Value::Map).collect();
        built
            .entities
            .push((id, Map::from([(ROWS.to_owned(), Value::Array(rows))])));
    }
    built
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::lang::{Statement, parse};

    fn build(src: &str) -> Build {
        match parse(src).unwrap().statements.remove(0).statement {
            Statement::Build(b) => b,
            other => panic!("{other:?}"),
        }
    }

    fn m(pairs: &[(&str, Value)]) -> Map {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn one_to_many_rows_grouped_by_key_and_ordered_by_cluster() {
        let b = build(
            "build by_hotel from hotel join room on hotel.id = room.hotel key hotel.id cluster room.no select room.rate",
        );
        let hotels = [m(&[("id", 1.into())]), m(&[("id", 2.into())])];
        let rooms = [
            m(&[("no", 12.into()), ("hotel", 1.into()), ("rate", 90.into())]),
            m(&[("no", 11.into()), ("hotel", 1.into()), ("rate", 80.into())]),
            m(&[("no", 21.into()), ("hotel", 3.into()), ("rate", 70.into())]),
            m(&[("no", 22.into()), ("rate", 70.into())]),
        ];
        let built = build_rows(&b, |k| match k {
            "hotel" => hotels.iter().collect(),
            _ => rooms.iter().collect(),
        });
        assert!(built.conflicts.is_empty());
        assert_eq!(built.rows, 2);
        assert_eq!(built.entities.len(), 1);
        let (id, value) = &built.entities[0];
        assert_eq!(id, "1");
        let Some(Value::Array(rows)) = value.get(ROWS) else {
            panic!("{value:?}")
        };
        let nos: Vec<_> = rows
            .iter()
            .map(|r| match r {
                Value::Map(r) => r["room_no"].clone(),
                _ => Value::Null,
            })
            .collect();
        assert_eq!(nos, vec![Value::Int(11), Value::Int(12)]);
    }

    /// Entities `a` (`id`, `g`) and `c` (`a`, `k`, `v`) from small domains, so that joins,
    /// missing properties and collisions all happen.
    fn arb_data() -> impl Strategy<Value = (Vec<Map>, Vec<Map>)> {
        let small = || prop::option::of(0..4i64);
        (
            prop::collection::vec((small(), small()), 0..6),
            prop::collection::vec((small(), small(), small()), 0..10),
        )
            .prop_map(|(a, c)| {
                let to_map = |pairs: Vec<(&str, Option<i64>)>| -> Map {
                    pairs
                        .into_iter()
                        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), Value::Int(v))))
                        .collect()
                };
                (
                    a.into_iter()
                        .map(|(id, g)| to_map(vec![("id", id), ("g", g)]))
                        .collect(),
                    c.into_iter()
                        .map(|(a, k, v)| to_map(vec![("a", a), ("k", k), ("v", v)]))
                        .collect(),
                )
            })
    }

    proptest! {
        /// The rows are exactly the nested-loop join's (grouped by key, one per key and cluster
        /// value), and a build without conflicts gives the same entities whatever the order of
        /// the source entities (the safety rule's claim).
        #[test]
        fn rows_are_the_nested_loop_join_and_safe_builds_ignore_order(
            (a, c) in arb_data(),
            key_g in any::<bool>(),
        ) {
            let src = if key_g {
                "build t from a join c on a.id = c.a key a.g cluster c.k select c.v a.id"
            } else {
                "build t from a join c on a.id = c.a key a.id cluster c.k select c.v"
            };
            let b = build(src);
            let built = build_rows(&b, |k| if k == "a" { a.iter().collect() } else { c.iter().collect() });
            // The nested loops.
            let mut expected: BTreeMap<String, std::collections::BTreeSet<Map>> = BTreeMap::new();
            for x in &a {
                for y in &c {
                    let (Some(id), Some(ca)) = (x.get("id"), y.get("a")) else { continue };
                    if id != ca { continue; }
                    let mut row = Map::new();
                    for (col, v) in [("a_id", x.get("id")), ("a_g", x.get("g")), ("c_k", y.get("k")), ("c_v", y.get("v"))] {
                        if let Some(v) = v && (col != "a_g" || key_g) {
                            row.insert(col.to_owned(), v.clone());
                        }
                    }
                    let key_col = if key_g { "a_g" } else { "a_id" };
                    if let Some(id) = row.get(key_col).map(id_part) {
                        expected.entry(id).or_default().insert(row);
                    }
                }
            }
            let mut got: BTreeMap<String, std::collections::BTreeSet<Map>> = BTreeMap::new();
            for (id, value) in &built.entities {
                let Some(Value::Array(rows)) = value.get(ROWS) else { panic!("{value:?}") };
                // Ordered by the cluster column.
                let ks: Vec<Option<&Value>> = rows.iter().map(|r| match r { Value::Map(m) => m.get("c_k"), _ => None }).collect();
                prop_assert!(ks.windows(2).all(|w| w[0] < w[1]), "{ks:?}");
                for r in rows {
                    if let Value::Map(m) = r { got.entry(id.clone()).or_default().insert(m.clone()); }
                }
            }
            if built.conflicts.is_empty() {
                prop_assert_eq!(&got, &expected);
                let (ra, rc): (Vec<&Map>, Vec<&Map>) = (a.iter().rev().collect(), c.iter().rev().collect());
                let again = build_rows(&b, |k| if k == "a" { ra.clone() } else { rc.clone() });
                prop_assert_eq!(again, built);
            } else {
                // Every row written is a join row; the conflicting ones are join rows too.
                for (id, rows) in &got {
                    prop_assert!(rows.is_subset(&expected[id]));
                }
                for conflict in &built.conflicts {
                    prop_assert!(expected[&conflict.id].contains(&conflict.first));
                    prop_assert!(expected[&conflict.id].contains(&conflict.second));
                }
            }
        }
    }

    #[test]
    fn different_values_for_one_key_and_cluster_conflict() {
        let b = build("build k from a join c on a.id = c.a key a.id select c.v");
        let a = [m(&[("id", 1.into())])];
        let c = [
            m(&[("a", 1.into()), ("v", 1.into())]),
            m(&[("a", 1.into()), ("v", 2.into())]),
        ];
        let built = build_rows(&b, |k| match k {
            "a" => a.iter().collect(),
            _ => c.iter().collect(),
        });
        assert_eq!(built.conflicts.len(), 1, "{built:?}");
    }
}
