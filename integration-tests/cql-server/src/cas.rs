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
}

fn invalid(message: impl ToString) -> CqlError {
    CqlError::new(DbError::Invalid, message)
}

/// Prepares the conditional statement `cql` (which has an `IF` condition).
pub(crate) fn prepare(db: &mut KassandraSession, cql: &str) -> Result<LwtPrepared, CqlError> {
    let (base, condition) = split_condition(cql).map_err(invalid)?;
    let base_query = kassandra::cql::parser::query(base)?;
    let QueryResult::Prepared(Prepared {
        id: base_id,
        prepared_metadata: base_meta,
        ..
    }) = db.prepare(base_query)?
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
        key_names
            .iter()
            .map(|k| format!("{k} = ?"))
            .collect::<Vec<_>>()
            .join(" AND ")
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
fn run<'a>(
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
fn equal(
    stored: Option<&CqlValue>,
    bound: &FrameValue<'_>,
    column: &str,
) -> Result<bool, CqlError> {
    match (stored, bound) {
        (_, FrameValue::NotSet) => Err(invalid(format!("condition value for {column} is not set"))),
        (None, FrameValue::Null) => Ok(true),
        (None, FrameValue::Some(_)) | (Some(_), FrameValue::Null) => Ok(false),
        (Some(v), FrameValue::Some(bytes)) => Ok(encode(v, column)? == *bytes),
    }
}

/// The wire form of a stored value, for the types a condition may compare.
fn encode(value: &CqlValue, column: &str) -> Result<Vec<u8>, CqlError> {
    Ok(match value {
        CqlValue::Ascii(s) | CqlValue::Text(s) => s.as_bytes().to_vec(),
        CqlValue::Blob(b) => b.clone(),
        CqlValue::Boolean(b) => vec![u8::from(*b)],
        CqlValue::Int(i) => i.to_be_bytes().to_vec(),
        CqlValue::BigInt(i) | CqlValue::Counter(i) | CqlValue::Timestamp(i) => {
            i.to_be_bytes().to_vec()
        }
        CqlValue::Double(bits) => bits.to_be_bytes().to_vec(),
        CqlValue::Float(bits) => bits.to_be_bytes().to_vec(),
        _ => {
            return Err(invalid(format!(
                "this test server cannot compare column {column} in a condition (type not supported)"
            )));
        }
    })
}
