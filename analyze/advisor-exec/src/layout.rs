//! A column family stored as tern entities: one entity per partition (id the partition key's
//! values joined by `:`), its rows an array of maps (`"E.F"` → integer) sorted by the clustering
//! key.

use std::collections::BTreeMap;

use tern_advisor::column_family::ColumnFamily;
use tern_advisor::model::{Attr, Model};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};

use crate::data::Row;
use crate::error::Result;

pub(crate) fn attr_key(a: Attr) -> String {
    format!("{}.{}", a.entity, a.field)
}

pub(crate) fn partition_id(
    cf: &ColumnFamily,
    values: impl Fn(Attr) -> Option<i64>,
) -> Option<String> {
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
) -> Result<()> {
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
        let key = Key::new(kind, id)?;
        written.0.push(key.clone());
        batch.push(Write::Put(Entity::new(key, encode(rows))));
        if batch.len() >= 500 {
            store.write_batch(std::mem::take(&mut batch)).await?;
        }
    }
    if !batch.is_empty() {
        store.write_batch(batch).await?;
    }
    Ok(())
}

/// How the columns of a stored row are named.
#[derive(Debug, Clone, Default)]
pub enum Naming {
    /// `"E.F"`: entity and field indices (what [`load`] writes).
    #[default]
    Indices,
    /// Names mapped to attributes: the `entity_field` columns a `build` statement of
    /// `tern advise --emit-migration` writes ([`Naming::columns`]).
    Columns(BTreeMap<String, Attr>),
}

impl Naming {
    /// The `entity_field` column names of every attribute of `model` (lower-case, as in the CQL
    /// of `advise_schema.cql` and the emitted `build` statements).
    pub fn columns(model: &Model) -> Naming {
        let mut names = BTreeMap::new();
        for (e, ent) in model.entities.iter().enumerate() {
            for f in 0..ent.fields.len() {
                let a = Attr {
                    entity: e,
                    field: f,
                };
                names.insert(ColumnFamily::column(model, a), a);
            }
        }
        Naming::Columns(names)
    }

    fn attr(&self, name: &str) -> Option<Attr> {
        match self {
            Naming::Indices => {
                let (e, f) = name.split_once('.')?;
                Some(Attr {
                    entity: e.parse().ok()?,
                    field: f.parse().ok()?,
                })
            }
            Naming::Columns(names) => names.get(name).copied(),
        }
    }
}

/// A partition's value: its rows as `{"rows": [...]}`, each row a map `"E.F"` → integer (the
/// inverse of [`decode`] with [`Naming::Indices`]).
pub(crate) fn encode(rows: Vec<Row>) -> Map {
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
    Map::from([("rows".to_owned(), Value::Array(array))])
}

/// The rows of a stored partition (`{"rows": [...]}`); columns that are not integers or that
/// `naming` does not know are left out.
pub fn decode(v: Option<&Value>, naming: &Naming) -> Vec<Row> {
    let Some(Value::Array(rows)) = v else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|r| match r {
            Value::Map(m) => Some(
                m.iter()
                    .filter_map(|(k, v)| match (naming.attr(k), v) {
                        (Some(a), Value::Int(i)) => Some((a, *i)),
                        _ => None,
                    })
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

/// The entities one `--execute` run wrote, to remove them afterwards.
#[derive(Debug, Default)]
pub struct Written(pub(crate) Vec<Key>);

impl Written {
    /// How many (a key written twice counts twice until [`Written::remove`]).
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
    pub async fn remove(&mut self, store: &dyn Store) -> Result<usize> {
        // An update of `--execute` writes partitions again: each key is deleted once.
        self.0.sort();
        self.0.dedup();
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
