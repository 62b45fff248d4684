//! [`Store::rename_kind`] for MongoDB: documents move one by one from the
//! collection of the old kind to the collection of the new one, by a copy and
//! then a delete of the source only if it is still exactly the copied document.
//!
//! Without a replica set MongoDB has no multi-document transactions, so a move
//! is not one atomic step; it is made safe by being idempotent and by never
//! deleting or overwriting anything but exactly the documents it copied:
//!
//! 1. the batch's `_id`s come from the open id cursor ([`crate::batches`]) and
//!    the documents from their `_id` range, as a scan reads them;
//! 2. the documents are inserted, unordered, into the new collection. A
//!    duplicate key means the new kind already holds the id: when its document
//!    is identical to the source (a move interrupted after the copy) the move
//!    goes on, otherwise it is a collision, reported, and both stay as they are;
//! 3. each source document is deleted only if it is still exactly the copied
//!    document ([`document_filter`]); never by range, which would also delete
//!    documents inserted into the range meanwhile;
//! 4. where the source changed (or vanished) since it was read, the copy is
//!    deleted again (only if it is still exactly the copy), the source is read
//!    again and its move is tried again, up to [`ATTEMPTS`] times; after that the
//!    call fails with a temporary `Busy` error (nothing lost: the entity stays
//!    under the old kind) rather than leave an entity behind unreported.
//!
//! [`Store::rename_kind`]: tern_core::store::Store::rename_kind

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use mongodb::error::ErrorKind as DriverKind;
use mongodb::options::{DeleteOneModel, WriteModel};
use tern_core::model::Key;
use tern_core::store::{Error, ErrorKind, RenameKindPage, RenameKindRequest, Result};

use crate::codec;
use crate::core::{DUPLICATE_KEY, META_COLLECTION, MongoStore, id_batch};
use crate::writes::document_filter;

/// How many times one call tries to move a document that changes under it.
pub(crate) const ATTEMPTS: usize = 5;

/// What one round of moves did.
#[derive(Default)]
struct Round {
    moved: u64,
    collisions: Vec<Key>,
    /// The `_id`s whose source changed or vanished between the read and the delete.
    changed: Vec<Bson>,
}

/// Refuses a kind that cannot be a MongoDB collection of entities.
fn check_kind(kind: &str) -> Result<()> {
    let reason = if kind.is_empty() {
        Some("is empty")
    } else if kind.contains(['$', '\0']) {
        Some("contains `$` or NUL, which MongoDB refuses in a collection name")
    } else if kind.starts_with("system.") {
        Some("starts with `system.`, reserved by MongoDB")
    } else if kind == META_COLLECTION {
        Some("is the collection of tern's metadata")
    } else {
        None
    };
    match reason {
        Some(r) => Err(Error::new(
            ErrorKind::ConfigInvalid,
            format!("kind {kind:?} {r}: choose another name for the rename"),
        )),
        None => Ok(()),
    }
}

/// The key of a source document of `kind`, for reports.
fn key_of(kind: &str, d: &Document) -> Result<Key> {
    let id = d
        .get("_id")
        .ok_or_else(|| Error::new(ErrorKind::InvalidData, "a document without _id"))
        .and_then(codec::id_from_bson)?;
    Key::new(kind, id).map_err(|e| Error::new(ErrorKind::InvalidData, e.to_string()))
}

impl MongoStore {
    /// See [`tern_core::store::Store::rename_kind`] and the module documentation.
    pub(crate) async fn rename_kind_inner(
        &self,
        request: RenameKindRequest,
    ) -> Result<RenameKindPage> {
        let (from, to) = (request.from.as_str(), request.to.as_str());
        check_kind(from)?;
        check_kind(to)?;
        if request.limit == 0 || from == to {
            return Ok(RenameKindPage::default());
        }
        let limit = request.limit.clamp(1, 100_000);
        let ids = self
            .batch_ids(
                from,
                Document::new(),
                request.cursor.as_ref(),
                limit,
                "rename kind: reading the batch's ids",
            )
            .await?;
        if ids.is_empty() {
            return Ok(RenameKindPage::default());
        }
        let mut docs = self.find_docs(from, id_batch(&ids), limit).await?;
        let cursor = crate::batches::page_cursor(&mut docs, &ids, limit);
        let mut page = RenameKindPage {
            cursor,
            ..RenameKindPage::default()
        };
        for attempt in 1..=ATTEMPTS {
            if docs.is_empty() {
                break;
            }
            let round = self.move_round(from, to, &docs).await?;
            page.renamed += round.moved;
            page.collisions.extend(round.collisions);
            if round.changed.is_empty() {
                break;
            }
            if attempt == ATTEMPTS {
                let first = docs
                    .iter()
                    .find(|d| d.get("_id") == round.changed.first())
                    .and_then(|d| key_of(from, d).ok())
                    .map(|k| k.to_string())
                    .unwrap_or_default();
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "mongodb: renaming kind {from} to {to}: {} documents changed during each \
                         of {ATTEMPTS} attempts to move them (another writer keeps updating them); \
                         they stay under {from}, nothing was lost; run again",
                        round.changed.len()
                    ),
                )
                .with_context("key", first)
                .with_context("store", self.location.clone())
                .set_temporary());
            }
            // The changed sources as they are now; vanished ones are skipped.
            docs = self
                .find_docs(from, doc! { "_id": { "$in": round.changed } }, limit)
                .await?;
        }
        Ok(page)
    }

    /// The documents of `kind` matching `query`, in `_id` order.
    async fn find_docs(&self, kind: &str, query: Document, limit: usize) -> Result<Vec<Document>> {
        let ctx = |e| {
            self.err("rename kind: reading the batch", e)
                .with_context("kind", kind.to_owned())
        };
        self.collection(kind)
            .find(query)
            .sort(doc! { "_id": 1 })
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
            .await
            .map_err(ctx)?
            .try_collect()
            .await
            .map_err(ctx)
    }

    /// Copies `docs` to `to`, then deletes each source that is still exactly its copy.
    async fn move_round(&self, from: &str, to: &str, docs: &[Document]) -> Result<Round> {
        let mut round = Round::default();
        let taken = self.copy(to, docs).await?;
        // The documents whose copy (or an identical document) is now under `to`.
        let mut copied: Vec<&Document> = Vec::with_capacity(docs.len());
        for (d, taken) in docs.iter().zip(&taken) {
            if let Some(message) = taken {
                let id = d.get("_id").cloned().unwrap_or(Bson::Null);
                let there = self
                    .collection(to)
                    .find_one(doc! { "_id": id })
                    .await
                    .map_err(|e| {
                        self.err("rename kind: reading the new kind's document", e)
                            .with_context("kind", to.to_owned())
                    })?;
                match there {
                    // A move interrupted after its copy (or the same document written twice).
                    Some(t) if &t == d => copied.push(d),
                    Some(_) => round.collisions.push(key_of(from, d)?),
                    None => {
                        return Err(Error::new(
                            ErrorKind::Rejected,
                            format!(
                                "mongodb: renaming kind {from} to {to}: the copy of a document \
                                 was refused as a duplicate key although {to} holds no document \
                                 with its _id ({message}): drop or relax the unique index of \
                                 collection {to} that it names, or remove the document it clashes \
                                 with, and run again"
                            ),
                        )
                        .with_context("key", key_of(from, d)?.to_string())
                        .with_context("store", self.location.clone()));
                    }
                }
            } else {
                copied.push(d);
            }
        }
        #[cfg(feature = "fault-injection")]
        if let Some(hook) = &self.after_copy {
            let keys = copied
                .iter()
                .map(|d| key_of(from, d))
                .collect::<Result<Vec<_>>>()?;
            hook(keys).await;
        }
        let deleted = self.delete_exact(from, &copied).await?;
        let mut undo: Vec<&Document> = Vec::new();
        for (d, deleted) in copied.into_iter().zip(deleted) {
            if deleted {
                round.moved += 1;
            } else {
                undo.push(d);
                round
                    .changed
                    .push(d.get("_id").cloned().unwrap_or(Bson::Null));
            }
        }
        if !undo.is_empty() {
            // The source changed or vanished since it was read: its copy must not
            // stay (it would resurrect a deleted entity or hide an update). A copy
            // that changed too (a writer of the new kind) stays and is met again
            // as a collision.
            self.delete_exact(to, &undo).await?;
        }
        Ok(round)
    }

    /// Inserts `docs` into `kind`, unordered: for each document, `None` when it
    /// was inserted, or the server's message when its key was taken.
    async fn copy(&self, kind: &str, docs: &[Document]) -> Result<Vec<Option<String>>> {
        let mut taken = vec![None; docs.len()];
        if docs.is_empty() {
            return Ok(taken);
        }
        let reply = self
            .collection(kind)
            .insert_many(docs.iter())
            .ordered(false)
            .await;
        let Err(e) = reply else {
            return Ok(taken);
        };
        let failed = || {
            self.err("rename kind: copying the batch", e.clone())
                .with_context("kind", kind.to_owned())
        };
        let DriverKind::InsertMany(many) = e.kind.as_ref() else {
            return Err(failed());
        };
        if many.write_concern_error.is_some() {
            return Err(failed());
        }
        for w in many.write_errors.iter().flatten() {
            match taken.get_mut(w.index) {
                Some(slot) if w.code == DUPLICATE_KEY => *slot = Some(w.message.clone()),
                _ => return Err(failed()),
            }
        }
        Ok(taken)
    }

    /// Deletes each of `docs` from `kind` if it is still exactly that document;
    /// whether each was deleted, in order.
    async fn delete_exact(&self, kind: &str, docs: &[&Document]) -> Result<Vec<bool>> {
        let ctx = |e| {
            self.err("rename kind: deleting moved documents", e)
                .with_context("kind", kind.to_owned())
        };
        if docs.is_empty() {
            return Ok(Vec::new());
        }
        if !self.bulk_write {
            let mut out = Vec::with_capacity(docs.len());
            for d in docs {
                let r = self
                    .collection(kind)
                    .delete_one(document_filter(d))
                    .await
                    .map_err(ctx)?;
                out.push(r.deleted_count == 1);
            }
            return Ok(out);
        }
        let namespace = self.collection(kind).namespace();
        let models: Vec<WriteModel> = docs
            .iter()
            .map(|d| {
                DeleteOneModel::builder()
                    .namespace(namespace.clone())
                    .filter(document_filter(d))
                    .build()
                    .into()
            })
            .collect();
        let results = self
            .client
            .bulk_write(models)
            .ordered(false)
            .verbose_results()
            .await
            .map_err(ctx)?;
        (0..docs.len())
            .map(|i| match results.delete_results.get(&i) {
                Some(r) => Ok(r.deleted_count == 1),
                None => Err(Error::new(
                    ErrorKind::Unexpected,
                    format!(
                        "mongodb: the server reported no result for delete {i} of a bulk write"
                    ),
                )
                .with_context("store", self.location.clone())),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_that_cannot_be_collections_are_refused() {
        for bad in ["", "a$b", "system.x", META_COLLECTION, "a\0b"] {
            let e = check_kind(bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConfigInvalid, "{bad:?}");
        }
        for good in ["post", "a.b", "blog_post"] {
            check_kind(good).unwrap();
        }
    }
}
