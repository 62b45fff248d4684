//! Null cells, as Cassandra has them.
//!
//! In Cassandra, binding `null` to a column of an `INSERT` or `UPDATE` deletes that cell, and a
//! deleted cell reads back as `null`. kassandra instead skips null values (the old cell stays)
//! and stores `DELETE col FROM ...` or a literal `null` as an *empty* value. This module makes
//! the server faithful: after a prepared write, the regular cells bound to `null` are deleted
//! (with kassandra's `DELETE col FROM`), and empty cells read back as `null`.

use std::collections::HashMap;

use kassandra::KassandraSession;
use kassandra::cql::value::CqlValue;
use kassandra::frame::request::query::Query;
use kassandra::frame::request::{QueryFlags, QueryParameters};
use kassandra::frame::response::error::Error as CqlError;
use kassandra::frame::response::result::{Prepared, QueryResult};
use kassandra::frame::value::FrameValue;

/// A prepared `INSERT` or `UPDATE`: its table and the columns of its bound values, in order.
#[derive(Debug, Clone)]
pub(crate) struct WriteInfo {
    keyspace: String,
    table: String,
    columns: Vec<String>,
}

/// The write a prepared statement is, if it is an `INSERT` or `UPDATE`.
pub(crate) fn write_info(cql: &str, prepared: &QueryResult) -> Option<WriteInfo> {
    let first = cql.split_whitespace().next()?;
    if !(first.eq_ignore_ascii_case("INSERT") || first.eq_ignore_ascii_case("UPDATE")) {
        return None;
    }
    let QueryResult::Prepared(Prepared {
        prepared_metadata, ..
    }) = prepared
    else {
        return None;
    };
    let spec = prepared_metadata.global_spec.as_ref()?;
    Some(WriteInfo {
        keyspace: spec.ks_name.clone(),
        table: spec.table_name.clone(),
        columns: prepared_metadata
            .col_specs
            .iter()
            .map(|c| c.name.clone())
            .collect(),
    })
}

/// The key columns of every table (partition key, then clustering columns, in key order).
#[derive(Debug, Default)]
pub(crate) struct Keys(HashMap<(String, String), Vec<String>>);

impl Keys {
    fn of(
        &mut self,
        db: &mut KassandraSession,
        ks: &str,
        table: &str,
    ) -> Result<Vec<String>, CqlError> {
        let id = (ks.to_owned(), table.to_owned());
        if let Some(keys) = self.0.get(&id) {
            return Ok(keys.clone());
        }
        // kassandra cannot select system_schema.columns by keyspace: read it all, in one page
        // (its paging over that table's tuple clustering key loses rows).
        let cql = "SELECT keyspace_name, table_name, column_name, kind, position FROM system_schema.columns";
        let mut keys: Vec<(u8, i32, String)> = Vec::new();
        {
            let mut query = Query::simple(cql)?;
            query.parameters.result_page_size = Some(usize::MAX);
            let QueryResult::Rows(rows) = db.process(query)? else {
                return Ok(Vec::new());
            };
            for row in rows.rows {
                let cells: Vec<Option<CqlValue>> = row.columns;
                let text = |i: usize| match cells.get(i) {
                    Some(Some(CqlValue::Text(s))) => Some(s.as_str()),
                    _ => None,
                };
                if text(0) != Some(ks) || text(1) != Some(table) {
                    continue;
                }
                let position = match cells.get(4) {
                    Some(Some(CqlValue::Int(p))) => *p,
                    _ => 0,
                };
                let rank = match text(3) {
                    Some("partition_key") => 0,
                    Some("clustering") => 1,
                    _ => continue,
                };
                keys.push((rank, position, text(2).unwrap_or_default().to_owned()));
            }
        }
        keys.sort();
        let keys: Vec<String> = keys.into_iter().map(|(_, _, name)| name).collect();
        self.0.insert(id, keys.clone());
        Ok(keys)
    }
}

/// After `info` ran with `values`: deletes the regular cells bound to `null`.
pub(crate) fn clear_nulls(
    db: &mut KassandraSession,
    keys: &mut Keys,
    info: &WriteInfo,
    values: &[FrameValue<'_>],
    params: &QueryParameters<'_>,
) -> Result<(), CqlError> {
    if !values.iter().any(|v| matches!(v, FrameValue::Null)) {
        return Ok(());
    }
    let key_columns = keys.of(db, &info.keyspace, &info.table)?;
    let nulls: Vec<&str> = info
        .columns
        .iter()
        .zip(values)
        .filter(|(c, v)| matches!(v, FrameValue::Null) && !key_columns.contains(c))
        .map(|(c, _)| c.as_str())
        .collect();
    if nulls.is_empty() {
        return Ok(());
    }
    let mut key_values = Vec::with_capacity(key_columns.len());
    for key in &key_columns {
        let at = info.columns.iter().position(|c| c == key);
        match at.and_then(|i| values.get(i)) {
            Some(v) => key_values.push(v.clone()),
            // Not every key column is bound: kassandra reports the error itself on the write.
            None => return Ok(()),
        }
    }
    let delete = format!(
        "DELETE {} FROM {}.{} WHERE {}",
        nulls.join(", "),
        info.keyspace,
        info.table,
        crate::keys_bound(&key_columns)
    );
    // kassandra cannot prepare a DELETE of columns: run it as a query with bound values.
    db.process(Query {
        query: kassandra::cql::parser::query(&delete)?,
        raw_query: &delete,
        parameters: QueryParameters {
            consistency: params.consistency,
            flags: QueryFlags::VALUES,
            data: key_values,
            result_page_size: None,
            paging_state: None,
            serial_consistency: params.serial_consistency,
            default_timestamp: params.default_timestamp,
        },
    })
    .map(|_| ())
}

/// Empty cells read back as `null` (kassandra stores deleted cells as empty values).
pub(crate) fn empty_cells_are_null(result: &mut QueryResult) {
    if let QueryResult::Rows(rows) = result {
        for row in &mut rows.rows {
            for cell in &mut row.columns {
                if matches!(cell, Some(CqlValue::Empty)) {
                    *cell = None;
                }
            }
        }
    }
}
