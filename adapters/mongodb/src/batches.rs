//! The `_id`s of the next batch of a kind, in `_id` order, for pushdown.
//!
//! A batch after `last` could be asked for with a fresh
//! `find({_id: {$gt: last}}).sort({_id: 1}).limit(n)` each time, but a server
//! that does not stop at the limit (SecantusDB reads every match, sorts, then
//! cuts) then pays for the whole rest of the collection on every batch: the
//! cost of a run grows with the square of its size. So the store keeps the
//! driver cursor of the last such query open and continues it (`getMore`)
//! when the next request starts where that cursor stopped; any other request
//! (the first batch, a resumed run, another runner) opens a new one.
//!
//! A continued cursor may miss documents inserted after it was opened, as a
//! scan may ([`tern_core::store`]'s contract); the engine's census catches them.

use std::sync::Mutex;
use std::time::Instant;

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use tern_core::store::{Cursor, Result};

use crate::backend::{MongoStore, decode_cursor, encode_cursor};
use crate::core::{after_id, and, map_mongo_error};

/// How many id cursors a store keeps open at most (one per concurrent run of a kind).
const KEEP: usize = 8;

/// An open id cursor: where it stands and for which kind.
struct OpenIds {
    kind: String,
    /// The cursor text of the last id handed out.
    at: String,
    ids: mongodb::Cursor<Document>,
}

/// The open id cursors of a store (shared by its clones).
#[derive(Default)]
pub(crate) struct IdCursors {
    open: Mutex<Vec<OpenIds>>,
}

impl std::fmt::Debug for IdCursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdCursors").finish_non_exhaustive()
    }
}

impl IdCursors {
    fn take(&self, kind: &str, at: &str) -> Option<mongodb::Cursor<Document>> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let i = open.iter().position(|o| o.kind == kind && o.at == at)?;
        Some(open.swap_remove(i).ids)
    }

    fn keep(&self, kind: &str, at: String, ids: mongodb::Cursor<Document>) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() >= KEEP {
            open.remove(0);
        }
        open.push(OpenIds {
            kind: kind.to_owned(),
            at,
            ids,
        });
    }
}

/// Reads up to `limit` ids from `cursor`.
async fn read_ids(
    cursor: &mut mongodb::Cursor<Document>,
    limit: usize,
) -> mongodb::error::Result<Vec<Bson>> {
    let mut ids = Vec::with_capacity(limit);
    while ids.len() < limit {
        match cursor.try_next().await? {
            Some(mut d) => {
                if let Some(id) = d.remove("_id") {
                    ids.push(id);
                }
            }
            None => break,
        }
    }
    Ok(ids)
}

impl MongoStore {
    /// The next `limit` ids of `kind` after `cursor` (from the start when `None`),
    /// in `_id` order. Fewer than `limit` means the kind has no more.
    pub(crate) async fn batch_ids(
        &self,
        kind: &str,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<Vec<Bson>> {
        let started = Instant::now();
        let at = cursor.map(|c| c.0.clone()).unwrap_or_default();
        let ctx = |e: mongodb::error::Error| {
            map_mongo_error("pushdown: reading the batch's ids", e)
                .with_context("store", self.location.clone())
                .with_context("kind", kind.to_owned())
        };
        if let Some(mut open) = self.id_cursors.take(kind, &at) {
            match read_ids(&mut open, limit).await {
                Ok(ids) => {
                    tracing::debug!(
                        kind,
                        ids = ids.len(),
                        ms = started.elapsed().as_secs_f64() * 1e3,
                        "pushdown: batch ids (open cursor)"
                    );
                    self.keep_if_more(kind, &ids, limit, open);
                    return Ok(ids);
                }
                // Timed out or killed on the server: start again from `cursor`.
                Err(e) => {
                    tracing::debug!(kind, error = %e, "pushdown: the id cursor failed; reopening")
                }
            }
        }
        let mut range = Vec::new();
        if let Some(c) = cursor {
            range.push(after_id(&decode_cursor(c)?));
        }
        let batch = u32::try_from(limit).unwrap_or(u32::MAX);
        let mut open = self
            .collection(kind)
            .find(and(range))
            .projection(doc! { "_id": 1 })
            .sort(doc! { "_id": 1 })
            .batch_size(batch)
            .await
            .map_err(ctx)?;
        let ids = read_ids(&mut open, limit).await.map_err(ctx)?;
        tracing::debug!(
            kind,
            ids = ids.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "pushdown: batch ids (new cursor)"
        );
        self.keep_if_more(kind, &ids, limit, open);
        Ok(ids)
    }

    fn keep_if_more(
        &self,
        kind: &str,
        ids: &[Bson],
        limit: usize,
        open: mongodb::Cursor<Document>,
    ) {
        if ids.len() >= limit {
            if let Some(last) = ids.last() {
                self.id_cursors.keep(kind, encode_cursor(last).0, open);
            }
        }
    }
}
