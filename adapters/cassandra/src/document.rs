//! The document layout: `(id text PRIMARY KEY, tern_version bigint, doc blob)`, where `doc` is
//! the whole entity in tern's canonical binary encoding.

use scylla::value::CqlValue;
use tern_core::model::{Entity, Key};
use tern_core::store::{Error, ErrorKind, Result, Write, WriteOutcome};

use crate::core::{
    CassStore, Retry, WriteMode, decode_doc, encode_doc, id_text, rows_of, table_of,
};
use crate::serial::SerialPut;
use crate::statement::Call;

/// The `tern_version` column of an entity.
fn version(e: &Entity) -> Result<i64> {
    i64::try_from(e.version).map_err(|_| {
        Error::new(
            ErrorKind::InvalidData,
            format!("version {} of {} exceeds a bigint", e.version, e.key),
        )
    })
}

/// `(id, tern_version, doc)` of an entity.
fn row(e: &Entity) -> Result<Vec<Option<CqlValue>>> {
    Ok(vec![
        Some(CqlValue::Text(id_text(&e.key.id))),
        Some(CqlValue::BigInt(version(e)?)),
        Some(CqlValue::Blob(encode_doc(e)?)),
    ])
}

impl CassStore {
    /// The entity with this key in a document table.
    pub(crate) async fn document_get(&self, key: &Key, serial: bool) -> Result<Option<Entity>> {
        let table = table_of(&key.kind)?;
        let id = id_text(&key.id);
        let cql = format!("SELECT doc FROM {}.{table} WHERE id = ?", self.ks());
        let result = if serial {
            self.core
                .execute_serial_read(&cql, (id.as_str(),), "get")
                .await?
        } else {
            self.core
                .execute(&cql, (id.as_str(),), Retry::Idempotent, "get")
                .await?
        };
        match rows_of::<(Vec<u8>,)>(result, "get")?.into_iter().next() {
            Some((doc,)) => decode_doc(&key.kind, &id, &doc).map(Some),
            None => Ok(None),
        }
    }

    /// One write to a document table.
    pub(crate) async fn document_write(
        &self,
        write: Write,
        mode: WriteMode,
    ) -> Result<WriteOutcome> {
        let ks = self.ks();
        match write {
            Write::Put(e) if mode == WriteMode::Serial => {
                let table = table_of(&e.key.kind)?;
                let insert = row(&e)?;
                let mut update = insert.clone();
                update.rotate_left(1);
                let put = SerialPut {
                    update: Some(Call {
                        cql: format!(
                            "UPDATE {ks}.{table} SET tern_version = ?, doc = ? WHERE id = ? \
                             IF EXISTS"
                        ),
                        values: update,
                    }),
                    insert: Call {
                        cql: format!(
                            "INSERT INTO {ks}.{table} (id, tern_version, doc) VALUES (?, ?, ?) \
                             IF NOT EXISTS"
                        ),
                        values: insert,
                    },
                    entity: e,
                };
                self.put_serial(put).await
            }
            Write::Delete(key) if mode == WriteMode::Serial => {
                let table = table_of(&key.kind)?;
                let call = Call {
                    cql: format!("DELETE FROM {ks}.{table} WHERE id = ? IF EXISTS"),
                    values: vec![Some(CqlValue::Text(id_text(&key.id)))],
                };
                self.delete_serial(&key, call).await
            }
            Write::Put(e) => {
                let table = table_of(&e.key.kind)?;
                self.core
                    .execute(
                        &format!(
                            "INSERT INTO {ks}.{table} (id, tern_version, doc) VALUES (?, ?, ?)"
                        ),
                        row(&e)?,
                        Retry::Idempotent,
                        "put",
                    )
                    .await?;
                Ok(WriteOutcome::Applied)
            }
            Write::Insert(e) => {
                let table = table_of(&e.key.kind)?;
                let call = Call {
                    cql: format!(
                        "INSERT INTO {ks}.{table} (id, tern_version, doc) VALUES (?, ?, ?) \
                         IF NOT EXISTS"
                    ),
                    values: row(&e)?,
                };
                self.cas_entity(&call, "insert", None, &e).await
            }
            Write::Replace { expected, new } => {
                let table = table_of(&new.key.kind)?;
                let mut values = row(&new)?;
                let id = values.remove(0);
                values.push(id);
                values.extend(row(&expected)?.into_iter().skip(1));
                let call = Call {
                    cql: format!(
                        "UPDATE {ks}.{table} SET tern_version = ?, doc = ? WHERE id = ? \
                         IF tern_version = ? AND doc = ?"
                    ),
                    values,
                };
                self.cas_entity(&call, "replace", Some(&expected), &new)
                    .await
            }
            Write::Delete(key) => {
                let table = table_of(&key.kind)?;
                self.core
                    .execute(
                        &format!("DELETE FROM {ks}.{table} WHERE id = ?"),
                        (id_text(&key.id),),
                        Retry::Idempotent,
                        "delete",
                    )
                    .await?;
                Ok(WriteOutcome::Applied)
            }
        }
    }
}
