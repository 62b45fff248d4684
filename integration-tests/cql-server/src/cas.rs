//! Lightweight transactions (compare-and-set) on top of kassandra, which has none.
//!
//! A statement `<write> IF <condition>` is split into the write without its condition (prepared
//! by kassandra) and a `SELECT` of the row the write addresses (by its partition key, also
//! prepared by kassandra). Under the server-wide lock the row is read, the condition evaluated,
//! and the write applied only when it holds. The answer is what Cassandra answers: a result set
//! whose first column is the boolean `[applied]`, followed, when not applied and the row exists,
//! by the current values of the condition columns (every column for `IF NOT EXISTS`).
//!
//! Supported conditions: `IF NOT EXISTS`, `IF EXISTS`, and `IF c1 = ? [AND c2 = ? ...]` with bind
//! markers. The write must address one row by its full partition key (tables with clustering
//! columns are refused when the partition holds more than one row).

use kassandra::KassandraSession;
use kassandra::cql::column::ColumnType;
use kassandra::cql::value::CqlValue;
use kassandra::error::DbError;
use kassandra::frame::request::QueryFlags;
use kassandra::frame::request::QueryParameters;
use kassandra::frame::request::execute::Execute;
use kassandra::frame::response::error::Error as CqlError;
use kassandra::frame::response::result::{
    ColumnSpec, Prepared, PreparedMetadata, QueryResult, ResultMetadata, Row, Rows, TableSpec,
};
use kassandra::frame::value::FrameValue;

use crate::lwt::split_condition;

/// The condition of a lightweight transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `IF NOT EXISTS`
    NotExists,
    /// `IF EXISTS`
    Exists,
    /// `IF c1 = ? AND c2 = ? ...`: the columns, each compared with one bound value.
    Equal(Vec<String>),
}

/// A prepared conditional statement.
#[derive(Debug, Clone)]
pub(crate) struct LwtPrepared {
    base_id: u128,
    select_id: u128,
    /// How many bound values the write without its condition takes.
    base_values: usize,
    /// Positions (among the write's values) of the partition key, in key order.
    key_positions: Vec<usize>,
    condition: Condition,
    table: TableSpec,
    /// The metadata of the whole statement (write values, then condition values).
    metadata: PreparedMetadata,
    /// The write, when it is an INSERT or UPDATE (for its null cells).
    write: Option<crate::nulls::WriteInfo>,
}

fn invalid(message: impl ToString) -> CqlError {
    CqlError::new(DbError::Invalid, message)
}

/// Prepares the conditional statement `cql` (which has an `IF` condition).
pub(crate) fn prepare(db: &mut KassandraSession, cql: &str) -> Result<LwtPrepared, CqlError> {
    let (base, condition) = split_condition(cql).map_err(invalid)?;
    let base_query = kassandra::cql::parser::query(base)?;
    let base_prepared = db.prepare(base_query)?;
    let write = crate::nulls::write_info(base, &base_prepared);
    let QueryResult::Prepared(Prepared {
        id: base_id,
        prepared_metadata: base_meta,
        ..
    }) = base_prepared
    else {
        return Err(invalid("preparing the write gave no prepared statement"));
    };
    let table = base_meta
        .global_spec
        .clone()
        .ok_or_else(|| invalid("conditional write without a table"))?;
    let mut pk = base_meta.pk_indexes.clone();
    pk.sort_by_key(|p| p.sequence);
    if pk.is_empty() {
        return Err(invalid(
            "a conditional write must give its partition key as bind markers (?)",
        ));
    }
    let key_positions: Vec<usize> = pk.iter().map(|p| usize::from(p.index)).collect();
    let key_names = key_positions
        .iter()
        .map(|&i| {
            base_meta
                .col_specs
                .get(i)
                .map(|c| c.name.clone())
                .ok_or_else(|| invalid("partition key index out of range"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let selected = match &condition {
        Condition::Equal(cols) => cols.join(", "),
        Condition::Exists | Condition::NotExists => "*".to_owned(),
    };
    let select = format!(
        "SELECT {selected} FROM {}.{} WHERE {}",
        table.ks_name,
        table.table_name,
        crate::keys_bound(&key_names)
    );
    let QueryResult::Prepared(Prepared {
        id: select_id,
        result_metadata: select_meta,
        ..
    }) = db.prepare(kassandra::cql::parser::query(&select)?)?
    else {
        return Err(invalid("preparing the read gave no prepared statement"));
    };
    let mut metadata = base_meta.clone();
    if let Condition::Equal(cols) = &condition {
        for col in cols {
            let spec = select_meta
                .col_specs
                .iter()
                .find(|c| &c.name == col)
                .ok_or_else(|| invalid(format!("unknown column in condition: {col}")))?;
            metadata
                .col_specs
                .push(ColumnSpec::new(col, spec.typ.clone()));
        }
    }
    Ok(LwtPrepared {
        base_id,
        select_id,
        base_values: base_meta.col_specs.len(),
        key_positions,
        condition,
        table,
        metadata,
        write,
    })
}

impl LwtPrepared {
    /// The answer to the PREPARE request, under statement id `id`.
    pub(crate) fn prepared(&self, id: u128) -> QueryResult {
        QueryResult::Prepared(Prepared {
            id,
            prepared_metadata: self.metadata.clone(),
            result_metadata: ResultMetadata::empty(),
        })
    }

    /// Runs the statement with `params` (all bound values: the write's, then the condition's).
    /// The caller holds the server-wide lock: read, check and write are one atomic step.
    pub(crate) fn execute(
        &self,
        db: &mut KassandraSession,
        keys: &mut crate::nulls::Keys,
        params: &QueryParameters<'_>,
    ) -> Result<QueryResult, CqlError> {
        let values = &params.data;
        let expected = self.base_values
            + match &self.condition {
                Condition::Equal(cols) => cols.len(),
                _ => 0,
            };
        if values.len() != expected {
            return Err(invalid(format!(
                "conditional statement takes {expected} values, got {}",
                values.len()
            )));
        }
        let key: Vec<FrameValue<'_>> = self
            .key_positions
            .iter()
            .map(|&i| values[i].clone())
            .collect();
        let rows = match run(db, self.select_id, key, params)? {
            QueryResult::Rows(rows) => rows,
            _ => return Err(invalid("reading the row gave no rows")),
        };
        if rows.rows.len() > 1 {
            return Err(invalid(
                "conditional writes on partitions with several rows are not supported by this test server",
            ));
        }
        let current = rows.rows.first();
        let applied = match (&self.condition, current) {
            (Condition::NotExists, row) => row.is_none(),
            (Condition::Exists, row) => row.is_some(),
            (Condition::Equal(_), None) => false,
            (Condition::Equal(cols), Some(row)) => {
                let mut all = true;
                for (i, value) in values[self.base_values..].iter().enumerate() {
                    let stored = row.columns.get(i).and_then(Option::as_ref);
                    all &= equal(stored, value, cols.get(i).map_or("", String::as_str))?;
                }
                all
            }
        };
        let mut metadata = ResultMetadata {
            global_spec: Some(self.table.clone()),
            paging_state: None,
            col_specs: vec![ColumnSpec::new("[applied]", ColumnType::Boolean)],
        };
        let mut row = Row::new();
        row.push(Some(CqlValue::Boolean(applied)));
        if applied {
            run(
                db,
                self.base_id,
                values[..self.base_values].to_vec(),
                params,
            )?;
            if let Some(write) = &self.write {
                crate::nulls::clear_nulls(db, keys, write, &values[..self.base_values], params)?;
            }
        } else if let Some(current) = current {
            metadata
                .col_specs
                .extend(rows.metadata.col_specs.iter().cloned());
            for value in &current.columns {
                row.push(value.clone());
            }
        }
        Ok(QueryResult::Rows(Rows {
            metadata,
            rows: vec![row],
        }))
    }
}

/// Executes kassandra's prepared statement `id` with `data`.
pub(crate) fn run<'a>(
    db: &mut KassandraSession,
    id: u128,
    data: Vec<FrameValue<'a>>,
    params: &QueryParameters<'a>,
) -> Result<QueryResult, CqlError> {
    let id = id.to_be_bytes();
    db.execute(Execute {
        id: &id,
        parameters: QueryParameters {
            consistency: params.consistency,
            flags: QueryFlags::VALUES,
            data,
            result_page_size: None,
            paging_state: None,
            serial_consistency: params.serial_consistency,
            default_timestamp: params.default_timestamp,
        },
    })
}

/// Whether the stored value equals the bound one (both `null` counts as equal, as in Cassandra).
///
/// Values are compared in their wire form. Sets and maps are compared as Cassandra compares
/// them, regardless of the order a client sent their elements in: both sides' elements (map
/// entries by key) are sorted by their bytes first. Lists keep their order.
fn equal(
    stored: Option<&CqlValue>,
    bound: &FrameValue<'_>,
    column: &str,
) -> Result<bool, CqlError> {
    // kassandra keeps deleted cells as empty values: they are null.
    let stored = stored.filter(|v| !matches!(v, CqlValue::Empty));
    match (stored, bound) {
        (_, FrameValue::NotSet) => Err(invalid(format!("condition value for {column} is not set"))),
        (None, FrameValue::Null) => Ok(true),
        (None, FrameValue::Some(_)) | (Some(_), FrameValue::Null) => Ok(false),
        (Some(v @ (CqlValue::Set(_) | CqlValue::Map(_))), FrameValue::Some(bytes)) => {
            let pairs = matches!(v, CqlValue::Map(_));
            let stored = canonical_collection(&encode(v, column)?, pairs);
            Ok(stored.is_some() && stored == canonical_collection(bytes, pairs))
        }
        (Some(v), FrameValue::Some(bytes)) => Ok(encode(v, column)? == *bytes),
    }
}

/// The elements of a v4 collection (`<n><len><bytes>...`; maps: key and value alternate),
/// map entries kept together, sorted by their bytes; `None` when malformed.
fn canonical_collection(bytes: &[u8], pairs: bool) -> Option<Vec<Vec<u8>>> {
    fn int(bytes: &[u8], at: &mut usize) -> Option<i32> {
        let b = bytes.get(*at..*at + 4)?;
        *at += 4;
        Some(i32::from_be_bytes(b.try_into().ok()?))
    }
    let mut at = 0;
    let n = usize::try_from(int(bytes, &mut at)?).ok()?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        let mut item = Vec::new();
        for _ in 0..if pairs { 2 } else { 1 } {
            let len = int(bytes, &mut at)?;
            item.extend_from_slice(&len.to_be_bytes());
            let len = usize::try_from(len).unwrap_or(0);
            item.extend_from_slice(bytes.get(at..at + len)?);
            at += len;
        }
        items.push(item);
    }
    (at == bytes.len()).then(|| {
        items.sort();
        items
    })
}

/// The wire form of a stored value, for the types a condition may compare.
fn encode(value: &CqlValue, column: &str) -> Result<Vec<u8>, CqlError> {
    Ok(match value {
        CqlValue::Ascii(s) | CqlValue::Text(s) => s.as_bytes().to_vec(),
        CqlValue::Blob(b) => b.clone(),
        CqlValue::Boolean(b) => vec![u8::from(*b)],
        CqlValue::TinyInt(i) => i.to_be_bytes().to_vec(),
        CqlValue::SmallInt(i) => i.to_be_bytes().to_vec(),
        CqlValue::Int(i) => i.to_be_bytes().to_vec(),
        CqlValue::BigInt(i) | CqlValue::Counter(i) | CqlValue::Timestamp(i) => {
            i.to_be_bytes().to_vec()
        }
        CqlValue::Double(bits) => bits.to_be_bytes().to_vec(),
        CqlValue::Float(bits) => bits.to_be_bytes().to_vec(),
        CqlValue::Uuid(u) | CqlValue::Timeuuid(u) => u.as_bytes().to_vec(),
        CqlValue::Inet(std::net::IpAddr::V4(ip)) => ip.octets().to_vec(),
        CqlValue::Inet(std::net::IpAddr::V6(ip)) => ip.octets().to_vec(),
        CqlValue::List(items) | CqlValue::Set(items) => {
            let mut out = count(items.len(), column)?;
            for item in items {
                push_element(&mut out, item, column)?;
            }
            out
        }
        CqlValue::Map(entries) => {
            let mut out = count(entries.len(), column)?;
            for (k, v) in entries {
                push_element(&mut out, k, column)?;
                push_element(&mut out, v, column)?;
            }
            out
        }
        _ => {
            return Err(invalid(format!(
                "this test server cannot compare column {column} in a condition (type not supported)"
            )));
        }
    })
}

fn count(n: usize, column: &str) -> Result<Vec<u8>, CqlError> {
    i32::try_from(n)
        .map(|n| n.to_be_bytes().to_vec())
        .map_err(|_| invalid(format!("collection too large in column {column}")))
}

fn push_element(out: &mut Vec<u8>, value: &CqlValue, column: &str) -> Result<(), CqlError> {
    let bytes = encode(value, column)?;
    out.extend(count(bytes.len(), column)?);
    out.extend(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v4 collection of `items` (for a map, `items` alternate keys and values).
    fn collection(n: i32, items: &[&[u8]]) -> Vec<u8> {
        let mut out = n.to_be_bytes().to_vec();
        for item in items {
            out.extend(i32::try_from(item.len()).unwrap_or(0).to_be_bytes());
            out.extend_from_slice(item);
        }
        out
    }

    fn bytes(items: &[&[u8]]) -> Vec<u8> {
        collection(i32::try_from(items.len()).unwrap_or(0), items)
    }

    fn eq(stored: &CqlValue, bound: &[u8]) -> bool {
        equal(Some(stored), &FrameValue::Some(bound), "c").unwrap_or(false)
    }

    #[test]
    fn conditions_compare_collections_as_cassandra_does() {
        let text = |s: &str| CqlValue::Text(s.to_owned());
        // Lists: order matters.
        let list = CqlValue::List(vec![text("a"), text("b")]);
        assert!(eq(&list, &bytes(&[b"a", b"b"])));
        assert!(!eq(&list, &bytes(&[b"b", b"a"])));
        // Sets: order does not.
        let set = CqlValue::Set(vec![text("a"), text("b")]);
        assert!(eq(&set, &bytes(&[b"b", b"a"])));
        assert!(!eq(&set, &bytes(&[b"a"])));
        // Maps: entries as pairs, in any order.
        let map = CqlValue::Map(vec![
            (text("k"), CqlValue::BigInt(1)),
            (text("j"), CqlValue::BigInt(2)),
        ]);
        let one = 1i64.to_be_bytes();
        let two = 2i64.to_be_bytes();
        assert!(eq(&map, &collection(2, &[b"j", &two, b"k", &one])));
        assert!(eq(&map, &collection(2, &[b"k", &one, b"j", &two])));
        assert!(!eq(&map, &collection(2, &[b"j", &one, b"k", &two])));
        // Malformed bytes never match.
        assert!(!eq(&set, &[0, 0, 0, 2, 0]));
        // Null only equals null.
        assert!(equal(None, &FrameValue::Null, "c").unwrap_or(false));
        assert!(!equal(Some(&set), &FrameValue::Null, "c").unwrap_or(true));
    }
}
