//! The `_id`s of the next batch of a kind, in `_id` order, for scans and pushdown.
//!
//! A batch after `last` could be asked for with a fresh
//! `find({_id: {$gt: last}, ...}).sort({_id: 1}).limit(n)` each time, but a
//! server that does not stop at the limit (SecantusDB reads every match, sorts,
//! then cuts) then pays for the whole rest of the collection on every batch:
//! the cost of a run grows with the square of its size. So the store keeps the
//! driver cursor of the last such query (ids only) open and continues it
//! (`getMore`) when the next request has the same query and starts where that
//! cursor stopped; any other request (the first batch, a resumed run, another
//! runner) opens a new one. A request from the start also drops the kept
//! cursors of its query: they belong to passes that ended early.
//!
//! For a scan and a pushdown batch only the ids come from the cursor, which
//! may have read them long ago (a SecantusDB cursor holds every match from
//! the moment it opened). The documents themselves are then read or updated
//! by `_id` range
//! ([`crate::core::id_batch`]), which the `_id` index answers in the batch's
//! size, so they are current: a document deleted since is not returned, one
//! changed since is returned as it is now. A document inserted after the
//! cursor opened may be missed, as the scan contract allows (the engine's
//! census catches it). A pass that writes nothing (`Store::scan_projected`)
//! takes the documents themselves from the cursor ([`MongoStore::batch_docs`]
//! with a projection): no range read per page, documents as the cursor found
//! them.

use std::time::Instant;

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, RawDocumentBuf, doc};
use tern_core::store::{Cursor, Result};

use crate::codec;
use crate::core::{MongoStore, after_id, and, decode_cursor, driver_error, encode_cursor};

/// Reads up to `limit` documents from `cursor` (as they are: [`codec::from_raw`]).
async fn read(
    cursor: &mut mongodb::Cursor<RawDocumentBuf>,
    limit: usize,
) -> mongodb::error::Result<Vec<RawDocumentBuf>> {
    let mut docs = Vec::with_capacity(limit);
    while docs.len() < limit {
        match cursor.try_next().await? {
            Some(d) => docs.push(d),
            None => break,
        }
    }
    Ok(docs)
}

impl MongoStore {
    /// The next `limit` ids of the documents of `kind` matching `query` after
    /// `cursor` (from the start when `None`), in `_id` order. Fewer than
    /// `limit` means there are no more. `purpose` names the call in messages.
    pub(crate) async fn batch_ids(
        &self,
        kind: &str,
        query: Document,
        cursor: Option<&Cursor>,
        limit: usize,
        purpose: &'static str,
    ) -> Result<Vec<Bson>> {
        let docs = self
            .batch_docs(kind, query, Some(doc! { "_id": 1 }), cursor, limit, purpose)
            .await?;
        Ok(docs
            .into_iter()
            .filter_map(|mut d| d.remove("_id"))
            .collect())
    }

    /// The next `limit` documents of `kind` matching `query` after `cursor`,
    /// in `_id` order, each holding what `projection` keeps (all of it when
    /// `None`), read from the kept cursor of the previous batch where there
    /// is one: as they were when that cursor opened (see the module
    /// documentation). Fewer than `limit` means there are no more.
    pub(crate) async fn batch_docs(
        &self,
        kind: &str,
        query: Document,
        projection: Option<Document>,
        cursor: Option<&Cursor>,
        limit: usize,
        purpose: &'static str,
    ) -> Result<Vec<Document>> {
        let started = Instant::now();
        let signature = Bson::Document(doc! { "q": query.clone(), "p": projection.clone() })
            .into_canonical_extjson()
            .to_string();
        let at = cursor.map(|c| c.0.clone()).unwrap_or_default();
        let ctx = |e: mongodb::error::Error| {
            driver_error(purpose, e)
                .with_context("store", self.location.clone())
                .with_context("kind", kind.to_owned())
        };
        if cursor.is_none() {
            self.open_cursors.forget(kind, &signature);
        }
        let open_cursor = self.open_cursors.take(kind, &signature, &at);
        // The documents read from `open` (an `age` cursor): logged, the cursor kept if more may follow.
        let done = |docs: Vec<Document>, open, age: &str| {
            tracing::debug!(
                kind,
                docs = docs.len(),
                ms = started.elapsed().as_secs_f64() * 1e3,
                "{purpose}: documents ({age} cursor)"
            );
            self.keep_if_more(kind, signature, &docs, limit, open);
            docs
        };
        if let Some(mut open) = open_cursor {
            match read(&mut open, limit).await {
                Ok(raws) => return Ok(done(codec::from_raw_all(&raws)?, open, "open")),
                // Timed out or killed on the server: start again from `cursor`.
                Err(e) => {
                    tracing::debug!(kind, error = %e, "{purpose}: the open cursor failed; reopening");
                }
            }
        }
        let mut parts = Vec::new();
        if !query.is_empty() {
            parts.push(query);
        }
        if let Some(c) = cursor {
            parts.push(after_id(&decode_cursor(c)?));
        }
        let coll = self.raw_collection(kind);
        let mut open = coll
            .find(and(parts))
            .with_options(
                mongodb::options::FindOptions::builder()
                    .projection(projection)
                    .sort(doc! { "_id": 1 })
                    .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
                    .build(),
            )
            .await
            .map_err(ctx)?;
        let raws = read(&mut open, limit).await.map_err(ctx)?;
        Ok(done(codec::from_raw_all(&raws)?, open, "new"))
    }

    fn keep_if_more(
        &self,
        kind: &str,
        signature: String,
        docs: &[Document],
        limit: usize,
        open: mongodb::Cursor<RawDocumentBuf>,
    ) {
        if let Some(last) = last_of_full(docs, limit) {
            self.open_cursors
                .keep(kind, signature, encode_cursor(last).0, open);
        }
    }
}

/// The `_id` of the last of `docs` when they fill a batch of `limit` (more
/// may follow), else `None` (the pass is done).
pub(crate) fn last_of_full(docs: &[Document], limit: usize) -> Option<&Bson> {
    if docs.len() >= limit {
        docs.last().and_then(|d| d.get("_id"))
    } else {
        None
    }
}

/// The cursor after a batch whose documents were read by the `_id` range of
/// `ids`: documents inserted into the range since the ids were read make
/// `docs` longer than `limit`, so the batch ends at the limit and the next one
/// continues after its last document; a full batch of ids continues after
/// the last id; a short one ends the pass.
pub(crate) fn page_cursor(docs: &mut Vec<Document>, ids: &[Bson], limit: usize) -> Option<Cursor> {
    if docs.len() > limit {
        docs.truncate(limit);
        docs.last().and_then(|d| d.get("_id")).map(encode_cursor)
    } else if ids.len() >= limit {
        ids.last().map(encode_cursor)
    } else {
        None
    }
}
