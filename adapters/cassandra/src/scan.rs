//! Scans: pages of a table read with the driver's paging state, continued across processes
//! by [`ScanCursor`]s, falling back to a token-range scan when the cluster refuses a stored
//! paging state.

use scylla::response::query_result::QueryResult;
use scylla::response::{PagingState, PagingStateResponse};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use tern_core::model::Entity;
use tern_core::store::{Cursor, Error, ErrorKind, Result, ScanPage, ScanRequest};

use crate::core::{CassStore, Layout, decode_doc, driver_error, is_invalid_request, rows_of};
use crate::cursor::{Fallback, ScanCursor};
use crate::token_range::{Queries, TokenRange};

/// The largest page a scan asks for.
const MAX_PAGE: usize = 5000;
/// The most rows one scan call reads while looking for entities that pass its filter.
const MAX_ROWS_PER_CALL: usize = 20_000;

/// Why a page could not be read.
enum PageError {
    /// The server refused the request as invalid (e.g. a paging state it cannot use).
    Refused(scylla::errors::ExecutionError),
    /// Anything else, mapped.
    Other(Error),
}

impl CassStore {
    pub(crate) fn queries(&self, kind: &str, layout: &Layout) -> Option<Queries> {
        match layout {
            Layout::Document => {
                let t = format!("{}.{kind}", self.ks());
                Some(Queries {
                    all: format!("SELECT id, doc FROM {t}"),
                    from_token: format!("SELECT id, doc FROM {t} WHERE token(id) >= ?"),
                    lookup: format!("SELECT id FROM {t} WHERE id = ?"),
                    partition_columns: 1,
                })
            }
            Layout::Native(schema) => Some(Queries {
                all: schema.select_all(),
                from_token: schema.select_from_token(),
                lookup: schema.partition_lookup(),
                partition_columns: schema.partition.len(),
            }),
            Layout::Missing { .. } => None,
        }
    }

    pub(crate) fn decode_row(&self, kind: &str, layout: &Layout, row: Row) -> Result<Entity> {
        match layout {
            Layout::Native(schema) => schema.entity(kind, row.columns).map_err(|message| {
                Error::new(
                    ErrorKind::InvalidData,
                    format!(
                        "a row of table {} cannot be read: {message}",
                        schema.qualified
                    ),
                )
                .with_context("kind", kind)
            }),
            _ => match row.columns.as_slice() {
                [Some(CqlValue::Text(id)), Some(CqlValue::Blob(doc))] => decode_doc(kind, id, doc),
                _ => Err(Error::new(
                    ErrorKind::InvalidData,
                    format!("a row of table {kind} does not have tern's document layout"),
                )),
            },
        }
    }

    /// The token of a row's partition (the position a token-range scan resumes from).
    async fn token_of(&self, queries: &Queries, row: &Row) -> Option<i64> {
        let key: Option<Vec<CqlValue>> = row
            .columns
            .iter()
            .take(queries.partition_columns)
            .cloned()
            .collect();
        let statement = self.core.prepare(&queries.lookup).await.ok()?;
        match statement.calculate_token(&key?) {
            Ok(token) => token.map(|t| t.value()),
            Err(e) => {
                tracing::debug!(error = %e, "cannot compute a row's token; the cursor has none");
                None
            }
        }
    }

    /// One server page (the statement is idempotent: the driver's retry policy applies).
    async fn page(
        &self,
        statement: &PreparedStatement,
        values: &[CqlValue],
        paging: PagingState,
        kind: &str,
    ) -> std::result::Result<(QueryResult, PagingStateResponse), PageError> {
        match self.core.execute_page(statement, values, paging).await {
            Ok(answer) => Ok(answer),
            Err(e) if is_invalid_request(&e) => Err(PageError::Refused(e)),
            Err(e) => Err(PageError::Other(
                driver_error(e, "scan").with_context("kind", kind),
            )),
        }
    }

    /// One page of a scan of `kind` (see the crate docs, "Scans and cursors"), of the rows in
    /// `range` when one is given (a partition of the kind).
    pub(crate) async fn scan_kind(
        &self,
        kind: &str,
        range: Option<TokenRange>,
        request: &ScanRequest,
    ) -> Result<ScanPage> {
        let cursor = ScanCursor::of_request(request.cursor.as_ref())?;
        let layout = self.layout(kind).await?;
        if matches!(layout, Layout::Missing { .. }) {
            return Ok(ScanPage::default());
        }
        let queries = self.queries(kind, &layout);
        let queries = match range {
            Some(range) => queries.and_then(|q| range.restrict(&q)),
            None => queries,
        };
        let Some(queries) = queries else {
            return Ok(ScanPage::default());
        };
        let mut entities = Vec::new();
        let cursor = self
            .scan_rows(kind, &queries, cursor, request.limit, |row| {
                let entity = self.decode_row(kind, &layout, row)?;
                let matches = request.filter.matches(&entity);
                if matches {
                    entities.push(entity);
                }
                Ok(matches)
            })
            .await?;
        Ok(ScanPage { entities, cursor })
    }

    /// Reads rows of `kind` with `queries` from `cursor` on, handing each to `take`, which
    /// says whether it kept the row: server pages of `limit` rows, and while `take` keeps
    /// nothing, further pages in the same call (growing x4 up to `MAX_PAGE` rows, at most
    /// `MAX_ROWS_PER_CALL` rows), so a sparse filter (a census sweep) costs few round trips.
    /// The cursor after the last row read, or `None` when the table is done.
    pub(crate) async fn scan_rows(
        &self,
        kind: &str,
        queries: &Queries,
        cursor: Option<ScanCursor>,
        limit: usize,
        mut take: impl FnMut(Row) -> Result<bool>,
    ) -> Result<Option<Cursor>> {
        let mut from = cursor.as_ref().and_then(|c| c.from);
        let mut last = cursor.as_ref().and_then(|c| c.last);
        let mut paging = cursor.as_ref().map_or_else(PagingState::start, |c| {
            PagingState::new_from_raw_bytes(c.paging.clone())
        });
        // Set while the next request uses the stored cursor's paging state.
        let mut resumed = cursor;
        let limit = limit.clamp(1, MAX_PAGE);
        let mut page_size = limit;
        let mut rows_read = 0usize;
        let mut kept = 0usize;
        loop {
            let cql = if from.is_some() {
                &queries.from_token
            } else {
                &queries.all
            };
            let mut statement = self.core.prepare(cql).await?;
            statement.set_is_idempotent(true);
            statement.set_page_size(i32::try_from(page_size).unwrap_or(5000));
            let values: Vec<CqlValue> = from.map(CqlValue::BigInt).into_iter().collect();
            let (result, next) = match self.page(&statement, &values, paging.clone(), kind).await {
                Ok(answer) => answer,
                Err(PageError::Refused(e)) => {
                    let Some(stored) = resumed.take() else {
                        return Err(driver_error(e, "scan").with_context("kind", kind));
                    };
                    match stored.fallback() {
                        Fallback::FromToken(token) if self.token_ranges => {
                            // Another driver or protocol version, a changed topology or
                            // schema: the position survives as a token.
                            tracing::warn!(kind, token, error = %e, "the cluster refused the cursor's paging state; continuing with a token-range scan");
                            from = Some(token);
                            paging = PagingState::start();
                            continue;
                        }
                        fallback => {
                            let why = if fallback == Fallback::Restart {
                                "the cursor holds no token to continue from"
                            } else {
                                "this cluster cannot run token-range queries"
                            };
                            return Err(Error::new(
                                ErrorKind::InvalidCursor,
                                format!(
                                    "cassandra: the cluster refused the paging state of this \
                                     cursor for {kind}, and {why}; the scan must restart"
                                ),
                            )
                            .with_driver_error(e));
                        }
                    }
                }
                Err(PageError::Other(err)) => return Err(err),
            };
            resumed = None;
            let rows = rows_of::<Row>(result, "scan")?;
            rows_read += rows.len();
            if let Some(row) = rows.last() {
                last = self.token_of(queries, row).await.or(last);
            }
            for row in rows {
                if take(row)? {
                    kept += 1;
                }
            }
            let state = match next {
                PagingStateResponse::HasMorePages { state } => state,
                PagingStateResponse::NoMorePages => return Ok(None),
            };
            if kept > 0 || rows_read >= MAX_ROWS_PER_CALL {
                let bytes = state.as_bytes_slice().ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unexpected,
                        "cassandra: the server announced more pages without a paging state",
                    )
                })?;
                let cursor = ScanCursor {
                    from,
                    last,
                    paging: bytes.to_vec(),
                };
                return Ok(Some(cursor.encode()));
            }
            paging = state;
            page_size = (page_size * 4).min(MAX_PAGE);
        }
    }
}
