//! [`Store::rename_kind`] for MongoDB: documents move one by one from the
//! collection of the old kind to the collection of the new one, by the protocol
//! of [`tern_core::store::rename_copy`] (copy, delete-if-same, undo, collision
//! refusal), over the primitives below. Rows are BSON documents as stored, so
//! every BSON type and field name carries over exactly.
//!
//! - the batch's `_id`s come from the open id cursor ([`crate::batches`]) and
//!   the documents from their `_id` range, as a scan reads them;
//! - the copy inserts the documents, unordered, into the new collection. A
//!   duplicate key means the new kind already holds the id: identical to the
//!   source (a move interrupted after the copy), the move goes on; otherwise a
//!   collision. A duplicate key with no document of that `_id` (a unique index
//!   of the new collection) is `Rejected`, naming the index to drop;
//! - a delete-if-same deletes a document only if it is still exactly the copied
//!   document ([`document_filter`]); never by range.
//!
//! [`Store::rename_kind`]: tern_core::store::Store::rename_kind

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, RawDocumentBuf, doc};
use mongodb::error::ErrorKind as DriverKind;
use mongodb::options::{DeleteOneModel, WriteModel};
use tern_core::model::Key;
use tern_core::store::rename_copy::{self, Copied, CopyRename, Side};
use tern_core::store::{Cursor, Error, ErrorKind, RenameKindPage, RenameKindRequest, Result};

use crate::codec;
use crate::core::{DUPLICATE_KEY, META_COLLECTION, MongoStore, id_batch};
use crate::writes::document_filter;

/// The two collections of a rename.
pub(crate) struct Names {
    from: String,
    to: String,
}

/// [`MongoStore`]'s primitives of the rename by copy.
struct Renamer<'a>(&'a MongoStore);

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
        rename_copy::rename_by_copy(&Renamer(self), request).await
    }
}

#[async_trait]
impl CopyRename for Renamer<'_> {
    type Row = Document;
    type Plan = Names;

    fn scheme(&self) -> &'static str {
        "mongodb"
    }

    fn location(&self) -> String {
        self.0.location.clone()
    }

    async fn plan(&self, from: &str, to: &str) -> Result<Option<Names>> {
        check_kind(from)?;
        check_kind(to)?;
        Ok(Some(Names {
            from: from.to_owned(),
            to: to.to_owned(),
        }))
    }

    async fn read_page(
        &self,
        plan: &Names,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<Document>, Option<Cursor>)> {
        let limit = limit.clamp(1, 100_000);
        let ids = self
            .0
            .batch_ids(
                &plan.from,
                Document::new(),
                cursor,
                limit,
                "rename kind: reading the batch's ids",
            )
            .await?;
        if ids.is_empty() {
            return Ok((Vec::new(), None));
        }
        let mut docs = self.0.find_docs(&plan.from, id_batch(&ids), limit).await?;
        let cursor = crate::batches::page_cursor(&mut docs, &ids, limit);
        Ok((docs, cursor))
    }

    async fn copy(&self, plan: &Names, docs: &[&Document]) -> Result<Vec<Copied>> {
        let (from, to) = (plan.from.as_str(), plan.to.as_str());
        let taken = self.0.insert_unordered(to, docs).await?;
        let mut out = Vec::with_capacity(docs.len());
        for (d, taken) in docs.iter().zip(taken) {
            let Some(message) = taken else {
                out.push(Copied::Yes);
                continue;
            };
            let id = d.get("_id").cloned().unwrap_or(Bson::Null);
            let there = self
                .0
                .raw_collection(to)
                .find_one(doc! { "_id": id })
                .await
                .map_err(|e| {
                    self.0
                        .err("rename kind: reading the new kind's document", e)
                        .with_context("kind", to.to_owned())
                })?
                .map(|r| codec::from_raw(&r))
                .transpose()?;
            match there {
                // A move interrupted after its copy (or the same document written twice).
                Some(t) if &&t == d => out.push(Copied::Yes),
                Some(_) => out.push(Copied::Collision),
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
                    .with_context("store", self.0.location.clone()));
                }
            }
        }
        Ok(out)
    }

    async fn delete_if_same(
        &self,
        plan: &Names,
        side: Side,
        docs: &[&Document],
    ) -> Result<Vec<bool>> {
        let kind = match side {
            Side::Old => &plan.from,
            Side::New => &plan.to,
        };
        self.0.delete_exact(kind, docs).await
    }

    async fn reread(&self, plan: &Names, docs: &[&Document]) -> Result<Vec<Document>> {
        let ids: Vec<Bson> = docs
            .iter()
            .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
            .collect();
        self.0
            .find_docs(
                &plan.from,
                doc! { "_id": { "$in": ids } },
                docs.len().max(1),
            )
            .await
    }

    fn key_of(&self, plan: &Names, d: &Document) -> Result<Key> {
        key_of(&plan.from, d)
    }

    #[cfg(feature = "fault-injection")]
    fn after_copy_hook(&self) -> Option<rename_copy::AfterCopyHook> {
        self.0.after_copy.clone()
    }
}

impl MongoStore {
    /// The documents of `kind` matching `query`, in `_id` order.
    async fn find_docs(&self, kind: &str, query: Document, limit: usize) -> Result<Vec<Document>> {
        let ctx = |e| {
            self.err("rename kind: reading the batch", e)
                .with_context("kind", kind.to_owned())
        };
        let raws: Vec<RawDocumentBuf> = self
            .raw_collection(kind)
            .find(query)
            .sort(doc! { "_id": 1 })
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
            .await
            .map_err(ctx)?
            .try_collect()
            .await
            .map_err(ctx)?;
        codec::from_raw_all(&raws)
    }

    /// Inserts `docs` into `kind`, unordered: for each document, `None` when it
    /// was inserted, or the server's message when its key was taken.
    async fn insert_unordered(
        &self,
        kind: &str,
        docs: &[&Document],
    ) -> Result<Vec<Option<String>>> {
        let mut taken = vec![None; docs.len()];
        if docs.is_empty() {
            return Ok(taken);
        }
        let reply = self
            .collection(kind)
            .insert_many(docs.iter().copied())
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
