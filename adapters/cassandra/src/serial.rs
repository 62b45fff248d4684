//! Puts and deletes through Paxos: the [`SerialWrites`] facet.
//!
//! Cassandra does not order a lightweight transaction against a plain write of the same row:
//! the transaction reads the row in its Paxos round and writes with its ballot's timestamp, so
//! a plain write that was given an earlier timestamp but reached the row after that read is
//! overwritten, though it was acknowledged. A lazy read migrating a stale entity (a
//! compare-and-set) then loses the application's put that raced it. Serial writes make the put
//! and the delete lightweight transactions too, so that Paxos orders every write of the row
//! (see "Plain writes and lightweight transactions" in the docs).

use async_trait::async_trait;
use tern_core::model::{Entity, Key};
use tern_core::store::{Error, ErrorKind, Result, SerialWrites, Write, WriteOutcome};

use crate::core::{CassStore, LwtOutcome, WriteMode};
use crate::statement::Call;

/// How many times a serial put goes from `UPDATE ... IF EXISTS` (no row) to `INSERT ... IF
/// NOT EXISTS` (a row) and back, while other writers delete and create the row in between.
const ROUNDS: usize = 8;

/// A put as lightweight transactions: an update of the existing row, else an insert.
pub(crate) struct SerialPut {
    /// `UPDATE ... SET <every non-key column> = ? WHERE <key> IF EXISTS`; `None` for a table
    /// of key columns only (where an existing row is the put).
    pub(crate) update: Option<Call>,
    /// `INSERT ... IF NOT EXISTS` of every column.
    pub(crate) insert: Call,
    /// The entity as the store reads it back.
    pub(crate) entity: Entity,
}

#[async_trait]
impl SerialWrites for CassStore {
    async fn write_serial(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        self.run_writes(writes, WriteMode::Serial).await
    }
}

impl CassStore {
    /// Runs a serial put: the update where the row exists, the insert where it does not, again
    /// while the row keeps appearing and vanishing in between (up to [`ROUNDS`], then a
    /// temporary `Busy`).
    pub(crate) async fn put_serial(&self, put: SerialPut) -> Result<WriteOutcome> {
        for _ in 0..ROUNDS {
            if let Some(update) = &put.update {
                match self
                    .core
                    .execute_lwt(&update.cql, update.values.clone(), "put")
                    .await?
                {
                    LwtOutcome::Applied(true) => return Ok(WriteOutcome::Applied),
                    // No row: insert it.
                    LwtOutcome::Applied(false) => {}
                    LwtOutcome::Unknown(err) => {
                        return self.settle(&put.entity.key, Some(&put.entity), err).await;
                    }
                }
            }
            match self
                .cas_entity(&put.insert, "put", None, &put.entity)
                .await?
            {
                WriteOutcome::Applied => return Ok(WriteOutcome::Applied),
                // A row of key columns only: the row there is the put.
                WriteOutcome::Conflict if put.update.is_none() => {
                    return Ok(WriteOutcome::Applied);
                }
                // Created meanwhile: update it.
                WriteOutcome::Conflict => {}
            }
        }
        Err(Error::new(
            ErrorKind::Busy,
            format!(
                "cassandra: a put of {}: the row kept being deleted and created again by \
                 other writers during the put ({ROUNDS} rounds); nothing was written, try again",
                put.entity.key
            ),
        )
        .set_temporary())
    }

    /// Runs a serial delete (`DELETE ... IF EXISTS`): a row that is not there is deleted.
    pub(crate) async fn delete_serial(&self, key: &Key, call: Call) -> Result<WriteOutcome> {
        match self
            .core
            .execute_lwt(&call.cql, call.values, "delete")
            .await?
        {
            LwtOutcome::Applied(_) => Ok(WriteOutcome::Applied),
            LwtOutcome::Unknown(err) => self.settle(key, None, err).await,
        }
    }

    /// Settles a serial write whose outcome is unknown by a serial read (which completes a
    /// Paxos round left in progress): applied where the row holds what the write left
    /// (`left`: the entity, `None`: no row), else `err` (tern repeats no failed request).
    async fn settle(&self, key: &Key, left: Option<&Entity>, err: Error) -> Result<WriteOutcome> {
        if crate::resolve::serial(self.get_with(key, true).await?.as_ref(), left) {
            Ok(WriteOutcome::Applied)
        } else {
            Err(err)
        }
    }
}
