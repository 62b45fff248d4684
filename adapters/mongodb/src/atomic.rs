//! [`AtomicWrites`] for MongoDB: several guarded writes in one multi-document
//! transaction, where the deployment runs transactions (a replica set or a
//! sharded cluster; a standalone server has none, and the facet is then absent
//! with the reason in `atomic_writes_hint`).
//!
//! Reads inside a MongoDB transaction take no lock: a guard that is only read
//! could be broken by another client between the read and the commit (write
//! skew). So every guard is *written* in the transaction, leaving the document
//! as it was: an [`Guard::Unchanged`] document gets a field [`GUARD_FIELD`] set
//! (only if it is still the expected one) and removed again; an
//! [`Guard::Absent`] key gets a placeholder inserted and deleted again. A write
//! of another client to a guarded key after the transaction's snapshot then
//! conflicts with it (`WriteConflict`), as it does for the writes themselves,
//! and the transaction aborts: the outcome is [`WriteOutcome::Conflict`],
//! nothing written.

use async_trait::async_trait;
use mongodb::ClientSession;
use mongodb::bson::doc;
use tern_core::store::{AtomicScope, AtomicWrites, Guard, Result, Write, WriteOutcome};

use crate::codec;
use crate::core::{MongoStore, is_duplicate_key};
use crate::writes::{replace_filter, replacement_pipeline};

/// The field a guard sets and removes again inside the transaction. `%`
/// followed by a letter that is not a hex digit: never a name tern writes
/// (`codec::escape_name`).
const GUARD_FIELD: &str = "%guard";

/// The reason a deployment has no transactions, for the refusal of a lazy kind rename.
pub(crate) const NO_TRANSACTIONS: &str = "MongoDB runs multi-document transactions only on a replica \
     set or a sharded cluster, and this server is standalone: start it as a replica set (one node \
     will do: `--replSet`, then `rs.initiate()`) to rename kinds lazily";

/// Why the transaction stops short of its commit.
enum Stop {
    /// A guard or a write's condition does not hold.
    Conflict,
    /// A store error.
    Failed(tern_core::store::Error),
}

impl From<tern_core::store::Error> for Stop {
    fn from(e: tern_core::store::Error) -> Stop {
        Stop::Failed(e)
    }
}

/// A transaction that met another writer (`WriteConflict`, labelled
/// `TransientTransactionError`): a conflict, not a failure.
fn is_transient(e: &mongodb::error::Error) -> bool {
    e.contains_label(mongodb::error::TRANSIENT_TRANSACTION_ERROR)
}

#[async_trait]
impl AtomicWrites for MongoStore {
    fn scope(&self) -> AtomicScope {
        AtomicScope::AnyKeys
    }

    async fn write_atomic(&self, guards: Vec<Guard>, writes: Vec<Write>) -> Result<WriteOutcome> {
        let mut session = self
            .client
            .start_session()
            .await
            .map_err(|e| self.err("starting a session", e))?;
        session
            .start_transaction()
            .await
            .map_err(|e| self.err("starting a transaction", e))?;
        let run = self.in_transaction(&mut session, &guards, &writes).await;
        let outcome = match run {
            Ok(()) => match session.commit_transaction().await {
                Ok(()) => return Ok(WriteOutcome::Applied),
                Err(e) if is_transient(&e) => WriteOutcome::Conflict,
                Err(e) => return Err(self.err("committing a transaction", e)),
            },
            Err(Stop::Conflict) => WriteOutcome::Conflict,
            Err(Stop::Failed(e)) => {
                // Best effort: the server aborts an abandoned transaction anyway.
                let _ = session.abort_transaction().await;
                return Err(e);
            }
        };
        let _ = session.abort_transaction().await;
        Ok(outcome)
    }
}

impl MongoStore {
    /// The guards and the writes inside the session's transaction.
    async fn in_transaction(
        &self,
        session: &mut ClientSession,
        guards: &[Guard],
        writes: &[Write],
    ) -> std::result::Result<(), Stop> {
        let mapped = |what: &'static str, key: &tern_core::model::Key| {
            let key = key.to_string();
            move |e: mongodb::error::Error| {
                if is_transient(&e) {
                    Stop::Conflict
                } else {
                    Stop::Failed(self.err(what, e).with_context("key", key))
                }
            }
        };
        for g in guards {
            let key = g.key();
            let coll = self.collection(&key.kind);
            let id = codec::id_to_bson(&key.id);
            match g {
                Guard::Unchanged(expected) => {
                    let r = coll
                        .update_one(
                            replace_filter(expected)?,
                            doc! { "$set": { GUARD_FIELD: 1 } },
                        )
                        .session(&mut *session)
                        .await
                        .map_err(mapped("guarding a document", key))?;
                    if r.matched_count != 1 {
                        return Err(Stop::Conflict);
                    }
                    coll.update_one(doc! { "_id": id }, doc! { "$unset": { GUARD_FIELD: "" } })
                        .session(&mut *session)
                        .await
                        .map_err(mapped("guarding a document", key))?;
                }
                Guard::Absent(_) => {
                    match coll
                        .insert_one(doc! { "_id": id.clone(), GUARD_FIELD: 1 })
                        .session(&mut *session)
                        .await
                    {
                        Ok(_) => {}
                        Err(e) if is_duplicate_key(&e) => return Err(Stop::Conflict),
                        Err(e) => return Err(mapped("guarding an absent key", key)(e)),
                    }
                    coll.delete_one(doc! { "_id": id })
                        .session(&mut *session)
                        .await
                        .map_err(mapped("guarding an absent key", key))?;
                }
            }
        }
        for w in writes {
            let key = w.key();
            let coll = self.collection(&key.kind);
            let id = codec::id_to_bson(&key.id);
            match w {
                Write::Put(e) => {
                    let d = codec::entity_to_document(e)?;
                    let filter = doc! { "_id": id };
                    match replacement_pipeline(&d) {
                        Some(p) => {
                            coll.update_one(filter, p)
                                .upsert(true)
                                .session(&mut *session)
                                .await
                        }
                        None => {
                            coll.replace_one(filter, d)
                                .upsert(true)
                                .session(&mut *session)
                                .await
                        }
                    }
                    .map_err(mapped("put", key))?;
                }
                Write::Insert(e) => {
                    match coll
                        .insert_one(codec::entity_to_document(e)?)
                        .session(&mut *session)
                        .await
                    {
                        Ok(_) => {}
                        Err(err) if is_duplicate_key(&err) => return Err(Stop::Conflict),
                        Err(err) => return Err(mapped("insert", key)(err)),
                    }
                }
                Write::Replace { expected, new } => {
                    let (filter, d) = (replace_filter(expected)?, codec::entity_to_document(new)?);
                    let r = match replacement_pipeline(&d) {
                        Some(p) => coll.update_one(filter, p).session(&mut *session).await,
                        None => coll.replace_one(filter, d).session(&mut *session).await,
                    }
                    .map_err(mapped("replace", key))?;
                    if r.matched_count != 1 {
                        return Err(Stop::Conflict);
                    }
                }
                Write::Delete(_) => {
                    coll.delete_one(doc! { "_id": id })
                        .session(&mut *session)
                        .await
                        .map_err(mapped("delete", key))?;
                }
            }
        }
        Ok(())
    }
}
