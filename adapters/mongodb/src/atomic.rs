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
//! conflicts with it (`WriteConflict`), as it does for the writes themselves.
//!
//! The server then aborts the transaction and labels the error
//! `TransientTransactionError`: nothing is written, and MongoDB says to run the
//! whole transaction again. [`AtomicWrites::write_atomic`] does so here
//! ([`TransactionRetry`]: up to 12 runs, jittered pauses growing from 5 ms),
//! reading the guards afresh each time; a commit labelled
//! `UnknownTransactionCommitResult` is committed again, as the driver's
//! documentation says. The answer is [`WriteOutcome::Conflict`] only when a
//! guard (or an insert's or a replace's condition) does not hold; an abort on
//! every run is a temporary `Busy` error, never a `Conflict`.

use async_trait::async_trait;
use mongodb::ClientSession;
use mongodb::bson::doc;
use mongodb::error::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
use tern_core::store::txn_retry::TransactionRetry;
use tern_core::store::{AtomicScope, AtomicWrites, Guard, Result, Write, WriteOutcome};

use crate::codec;
use crate::core::{MongoStore, is_duplicate_key};
use crate::writes::{replace_filter, replacement_pipeline};

/// The field a guard sets and removes again inside the transaction. `%`
/// followed by a letter that is not a hex digit: never a name tern writes
/// (`codec::escape_name`).
const GUARD_FIELD: &str = "%guard";

/// How many times a commit whose result is unknown is sent again.
const COMMIT_ATTEMPTS: u32 = 5;

/// The reason a deployment has no transactions, for the refusal of a lazy kind rename.
pub(crate) const NO_TRANSACTIONS: &str = "MongoDB runs multi-document transactions only on a replica \
     set or a sharded cluster, and this server is standalone: start it as a replica set (one node \
     will do: `--replSet`, then `rs.initiate()`) to rename kinds lazily";

/// Why the transaction stops short of its commit.
enum Stop {
    /// A guard or a write's condition does not hold.
    Conflict,
    /// The server aborted the transaction (`TransientTransactionError`):
    /// nothing written, the whole transaction may run again.
    Aborted(mongodb::error::Error),
    /// A store error.
    Failed(tern_core::store::Error),
}

impl From<tern_core::store::Error> for Stop {
    fn from(e: tern_core::store::Error) -> Stop {
        Stop::Failed(e)
    }
}

/// What one run of the transaction came to.
enum Run {
    /// Committed, or stopped by a guard: the answer.
    Done(WriteOutcome),
    /// Aborted by the server: run it again.
    Aborted(mongodb::error::Error),
}

/// Where a driver error met the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// An operation inside it.
    Operation,
    /// Its commit.
    Commit,
}

/// What a driver error means for the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Run the whole transaction again (nothing of it was written).
    RunAgain,
    /// Send the commit again (it may or may not have been applied).
    CommitAgain,
    /// A failure: report it.
    Fail,
}

/// The decision MongoDB's documentation prescribes, from the error's labels
/// (`has_label`): `TransientTransactionError` runs the transaction again,
/// `UnknownTransactionCommitResult` on a commit sends the commit again.
fn next_after(step: Step, has_label: impl Fn(&str) -> bool) -> Next {
    if has_label(TRANSIENT_TRANSACTION_ERROR) {
        Next::RunAgain
    } else if step == Step::Commit && has_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) {
        Next::CommitAgain
    } else {
        Next::Fail
    }
}

/// [`next_after`] for a driver error.
fn next_for(step: Step, e: &mongodb::error::Error) -> Next {
    next_after(step, |label| e.contains_label(label))
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
        let mut retry = TransactionRetry::new();
        loop {
            match self.run_once(&mut session, &guards, &writes).await? {
                Run::Done(outcome) => {
                    if retry.aborted() > 0 {
                        tracing::debug!(
                            aborted = retry.aborted(),
                            ?outcome,
                            "transaction ran again"
                        );
                    }
                    return Ok(outcome);
                }
                Run::Aborted(e) => {
                    let key = writes.first().map(|w| w.key().to_string());
                    let cause = self.err("a transaction", e);
                    let cause = match key {
                        Some(k) => cause.with_context("key", k),
                        None => cause,
                    };
                    retry
                        .after_abort(cause, || {
                            format!(
                                "mongodb: a transaction of {} guards and {} writes",
                                guards.len(),
                                writes.len()
                            )
                        })
                        .await?;
                }
            }
        }
    }
}

impl MongoStore {
    /// One run of the transaction: its guards and writes, then its commit
    /// (sent again while its result is unknown).
    async fn run_once(
        &self,
        session: &mut ClientSession,
        guards: &[Guard],
        writes: &[Write],
    ) -> Result<Run> {
        session
            .start_transaction()
            .await
            .map_err(|e| self.err("starting a transaction", e))?;
        match self.in_transaction(session, guards, writes).await {
            Ok(()) => {}
            Err(stop) => {
                // Best effort: the server aborts an abandoned (or already
                // aborted) transaction anyway; this ends it in the session.
                let _ = session.abort_transaction().await;
                return match stop {
                    Stop::Conflict => Ok(Run::Done(WriteOutcome::Conflict)),
                    Stop::Aborted(e) => Ok(Run::Aborted(e)),
                    Stop::Failed(e) => Err(e),
                };
            }
        }
        let mut sent = 0;
        loop {
            sent += 1;
            let e = match session.commit_transaction().await {
                Ok(()) => return Ok(Run::Done(WriteOutcome::Applied)),
                Err(e) => e,
            };
            match next_for(Step::Commit, &e) {
                Next::RunAgain => return Ok(Run::Aborted(e)),
                Next::CommitAgain if sent < COMMIT_ATTEMPTS => {}
                Next::CommitAgain => {
                    return Err(self.err("committing a transaction", e).with_context(
                        "outcome",
                        format!(
                            "unknown after {sent} commits: the writes may or may not be \
                                 applied; read the keys again"
                        ),
                    ));
                }
                Next::Fail => return Err(self.err("committing a transaction", e)),
            }
        }
    }

    /// The guards and the writes inside the session's transaction.
    async fn in_transaction(
        &self,
        session: &mut ClientSession,
        guards: &[Guard],
        writes: &[Write],
    ) -> std::result::Result<(), Stop> {
        let mapped = |what: &'static str, key: &tern_core::model::Key| {
            let key = key.to_string();
            move |e: mongodb::error::Error| match next_for(Step::Operation, &e) {
                Next::RunAgain => Stop::Aborted(e),
                Next::CommitAgain | Next::Fail => {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(set: &'static [&'static str]) -> impl Fn(&str) -> bool {
        move |label| set.contains(&label)
    }

    /// A `WriteConflict` (labelled `TransientTransactionError`), inside the
    /// transaction or at its commit, runs the whole transaction again: it is
    /// neither a conflict of the caller's guards nor a failure.
    #[test]
    fn a_transient_transaction_error_runs_the_transaction_again() {
        for step in [Step::Operation, Step::Commit] {
            assert_eq!(
                next_after(step, labels(&[TRANSIENT_TRANSACTION_ERROR])),
                Next::RunAgain
            );
        }
    }

    /// A commit whose result is unknown is committed again, not run again
    /// (its writes may be applied) and not reported failed.
    #[test]
    fn an_unknown_commit_result_commits_again() {
        assert_eq!(
            next_after(Step::Commit, labels(&[UNKNOWN_TRANSACTION_COMMIT_RESULT])),
            Next::CommitAgain
        );
        assert_eq!(
            next_after(
                Step::Operation,
                labels(&[UNKNOWN_TRANSACTION_COMMIT_RESULT])
            ),
            Next::Fail
        );
    }

    /// Any other error (a duplicate key is handled before, as a conflict) is
    /// a failure; a retryable-write label alone does not run a transaction again.
    #[test]
    fn other_errors_fail() {
        for step in [Step::Operation, Step::Commit] {
            assert_eq!(next_after(step, labels(&[])), Next::Fail);
            assert_eq!(
                next_after(step, labels(&["RetryableWriteError"])),
                Next::Fail
            );
        }
    }
}
