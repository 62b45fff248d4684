//! What a dry run changed, entity by entity: the original and the current state
//! of every entity the run wrote, ordered by encoded key.
//!
//! A dry run over millions of entities changes millions of entities, so the
//! records are compact (the embedded store's entity encoding) and, with the
//! `embedded` feature (the default), kept in a temporary redb file that is
//! removed when the log is dropped: memory stays flat however large the run.
//! Without that feature they are kept in memory.

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::model::keycode::{encode_key, encode_kind_prefix};
use crate::model::{Entity, Key};
use crate::store::{Error, ErrorKind, Result};

/// One changed entity: as it was in the real store, and as the run left it
/// (`None`: absent / deleted).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Record {
    pub(crate) original: Option<Entity>,
    pub(crate) current: Option<Entity>,
}

/// The stored form of a [`Record`].
#[derive(Serialize, Deserialize)]
struct Stored {
    kind: String,
    original: Option<Vec<u8>>,
    current: Option<Vec<u8>>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Unexpected,
        format!("the dry run's change log: {what}: {e}"),
    )
}

fn encode_one(e: &Entity) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    crate::model::codec::encode_entity(&e.key.id, e.version, &e.value, &mut out)
        .map_err(|err| failed("encoding an entity", err))?;
    Ok(out)
}

fn decode_one(kind: &str, bytes: &[u8]) -> Result<Entity> {
    let (id, version, value) =
        crate::model::codec::decode_entity(bytes).map_err(|e| failed("decoding an entity", e))?;
    Ok(Entity {
        key: Key {
            kind: kind.to_owned(),
            id,
        },
        version,
        value,
    })
}

fn encode(key: &Key, record: &Record) -> Result<Vec<u8>> {
    let stored = Stored {
        kind: key.kind.clone(),
        original: record.original.as_ref().map(encode_one).transpose()?,
        current: record.current.as_ref().map(encode_one).transpose()?,
    };
    postcard::to_allocvec(&stored).map_err(|e| failed("encoding a record", e))
}

fn decode(bytes: &[u8]) -> Result<Record> {
    let stored: Stored = postcard::from_bytes(bytes).map_err(|e| failed("decoding a record", e))?;
    Ok(Record {
        original: stored
            .original
            .as_deref()
            .map(|b| decode_one(&stored.kind, b))
            .transpose()?,
        current: stored
            .current
            .as_deref()
            .map(|b| decode_one(&stored.kind, b))
            .transpose()?,
    })
}

/// Encoded keys and stored records, in key order.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The two tables of a backing: every record, and the keys of the records of
/// entities the run created (so that finding them reads nothing else).
#[derive(Debug, Clone, Copy)]
enum Table {
    Records,
    Created,
}

/// A record to store: its encoded key, its stored form, and whether it is of
/// an entity the run created.
type Row = (Vec<u8>, Vec<u8>, bool);

/// Created entities with their encoded keys, in key order.
pub(crate) type Created = Vec<(Vec<u8>, Entity)>;

/// The first encoded key after every key of `kind` (see [`encode_kind_prefix`],
/// which ends in `00 00`).
fn kind_end(kind: &str) -> Vec<u8> {
    let mut end = encode_kind_prefix(kind);
    if let Some(last) = end.last_mut() {
        *last = 0x01;
    }
    end
}

#[cfg(feature = "embedded")]
pub(super) mod backing {
    //! A redb file in the temporary folder, without durability (it is scratch).

    use std::ops::Bound;
    use std::path::PathBuf;

    use redb::{Database, Durability, ReadableDatabase, TableDefinition};

    use super::{Row, Rows, Table, failed};
    use crate::store::Result;

    const RECORDS: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("changes");
    /// The keys of created entities (the value is empty).
    const CREATED: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("created");
    /// The names of the scratch files: `tern-dry-run-<pid>-<uuid>.redb`.
    const PREFIX: &str = "tern-dry-run-";
    /// redb's page cache for the scratch file (its default is 1 GiB).
    const CACHE_BYTES: usize = 32 << 20;

    /// A fresh scratch file name `<prefix><pid>-<uuid>.redb` in the temporary
    /// folder, after removing the files of that prefix left by processes that
    /// no longer run (a run killed with `kill -9` cannot remove its own; only
    /// where `/proc` tells). Also for the join index's spill (`join::index`).
    pub(in crate::migrate) fn scratch_path(prefix: &str) -> PathBuf {
        let dir = std::env::temp_dir();
        remove_orphans(&dir, prefix);
        dir.join(format!(
            "{prefix}{}-{}.redb",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ))
    }

    fn remove_orphans(dir: &std::path::Path, prefix: &str) {
        if !std::path::Path::new("/proc/self").exists() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix))
                .and_then(|rest| rest.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    pub(super) struct Backing {
        db: Database,
        pub(super) path: PathBuf,
    }

    impl Backing {
        pub(super) fn new() -> Result<Backing> {
            let path = scratch_path(PREFIX);
            let db = redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .create(&path)
                .map_err(|e| failed(&format!("creating {}", path.display()), e))?;
            Ok(Backing { db, path })
        }

        /// The records of `keys`, in one read transaction.
        pub(super) fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
            let txn = self.db.begin_read().map_err(|e| failed("reading", e))?;
            let table = match txn.open_table(RECORDS) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; keys.len()]),
                Err(e) => return Err(failed("reading", e)),
            };
            keys.iter()
                .map(|k| {
                    Ok(table
                        .get(k.as_slice())
                        .map_err(|e| failed("reading", e))?
                        .map(|v| v.value().to_vec()))
                })
                .collect()
        }

        /// Stores `rows` and keeps the created table in step, in one transaction.
        pub(super) fn put_all(&self, rows: Vec<Row>) -> Result<()> {
            let mut txn = self.db.begin_write().map_err(|e| failed("writing", e))?;
            txn.set_durability(Durability::None)
                .map_err(|e| failed("writing", e))?;
            {
                let mut records = txn.open_table(RECORDS).map_err(|e| failed("writing", e))?;
                let mut created = txn.open_table(CREATED).map_err(|e| failed("writing", e))?;
                for (k, v, is_created) in &rows {
                    records
                        .insert(k.as_slice(), v.as_slice())
                        .map_err(|e| failed("writing", e))?;
                    if *is_created {
                        created.insert(k.as_slice(), &[][..])
                    } else {
                        created.remove(k.as_slice()).map(|_| None)
                    }
                    .map_err(|e| failed("writing", e))?;
                }
            }
            txn.commit().map_err(|e| failed("writing", e))
        }

        /// Up to `limit` rows of `table` with keys in `(from, to)`, in key order
        /// (a created key's value is empty), and whether more follow.
        pub(super) fn range(
            &self,
            table: Table,
            from: Bound<&[u8]>,
            to: Bound<&[u8]>,
            limit: usize,
        ) -> Result<(Rows, bool)> {
            let txn = self.db.begin_read().map_err(|e| failed("reading", e))?;
            let mut out = Vec::new();
            let t = match txn.open_table(match table {
                Table::Records => RECORDS,
                Table::Created => CREATED,
            }) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok((out, false)),
                Err(e) => return Err(failed("reading", e)),
            };
            for item in t
                .range::<&[u8]>((from, to))
                .map_err(|e| failed("reading", e))?
            {
                let (k, v) = item.map_err(|e| failed("reading", e))?;
                if out.len() >= limit {
                    return Ok((out, true));
                }
                out.push((k.value().to_vec(), v.value().to_vec()));
            }
            Ok((out, false))
        }
    }

    impl Drop for Backing {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(not(feature = "embedded"))]
mod backing {
    //! In memory, for builds without redb.

    use std::collections::{BTreeMap, BTreeSet};
    use std::ops::Bound;
    use std::sync::Mutex;

    use super::{Row, Rows, Table};
    use crate::store::Result;

    #[derive(Default)]
    struct Maps {
        records: BTreeMap<Vec<u8>, Vec<u8>>,
        created: BTreeSet<Vec<u8>>,
    }

    pub(super) struct Backing {
        maps: Mutex<Maps>,
    }

    impl Backing {
        pub(super) fn new() -> Result<Backing> {
            Ok(Backing {
                maps: Mutex::new(Maps::default()),
            })
        }

        fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
            self.maps
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        pub(super) fn get_many(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
            let maps = self.maps();
            Ok(keys.iter().map(|k| maps.records.get(k).cloned()).collect())
        }

        pub(super) fn put_all(&self, rows: Vec<Row>) -> Result<()> {
            let mut maps = self.maps();
            for (k, v, is_created) in rows {
                if is_created {
                    maps.created.insert(k.clone());
                } else {
                    maps.created.remove(&k);
                }
                maps.records.insert(k, v);
            }
            Ok(())
        }

        pub(super) fn range(
            &self,
            table: Table,
            from: Bound<&[u8]>,
            to: Bound<&[u8]>,
            limit: usize,
        ) -> Result<(Rows, bool)> {
            let maps = self.maps();
            let rows: Vec<(&Vec<u8>, Option<&Vec<u8>>)> = match table {
                Table::Records => maps
                    .records
                    .range::<[u8], _>((from, to))
                    .take(limit.saturating_add(1))
                    .map(|(k, v)| (k, Some(v)))
                    .collect(),
                Table::Created => maps
                    .created
                    .range::<[u8], _>((from, to))
                    .take(limit.saturating_add(1))
                    .map(|k| (k, None))
                    .collect(),
            };
            let mut out = Vec::new();
            for (k, v) in rows {
                if out.len() >= limit {
                    return Ok((out, true));
                }
                out.push((k.clone(), v.cloned().unwrap_or_default()));
            }
            Ok((out, false))
        }
    }
}

/// The change log of one dry run.
pub(crate) struct ChangeLog {
    backing: backing::Backing,
    /// Kinds that may hold entities the run created (checked before use).
    created_kinds: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for ChangeLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeLog").finish_non_exhaustive()
    }
}

impl ChangeLog {
    pub(crate) fn new() -> Result<ChangeLog> {
        Ok(ChangeLog {
            backing: backing::Backing::new()?,
            created_kinds: Mutex::new(BTreeSet::new()),
        })
    }

    /// The record of `key`, if the run wrote it.
    pub(crate) fn get(&self, key: &Key) -> Result<Option<Record>> {
        Ok(self.get_many(std::slice::from_ref(key))?.pop().flatten())
    }

    /// The records of `keys` (`None` where the run wrote nothing), read together.
    pub(crate) fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
        let encoded: Vec<Vec<u8>> = keys.iter().map(encode_key).collect();
        self.backing
            .get_many(&encoded)?
            .into_iter()
            .map(|b| b.map(|b| decode(&b)).transpose())
            .collect()
    }

    /// Stores these records (replacing earlier ones of the same keys).
    pub(crate) fn put_all(&self, records: &[(Key, Record)]) -> Result<()> {
        let mut encoded = Vec::with_capacity(records.len());
        for (key, record) in records {
            if record.original.is_none() && record.current.is_some() {
                self.created_kinds
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(key.kind.clone());
            }
            let created = record.original.is_none() && record.current.is_some();
            encoded.push((encode_key(key), encode(key, record)?, created));
        }
        self.backing.put_all(encoded)
    }

    /// The entities of `kind` the run created (absent from the real store),
    /// after the encoded key `after`, in key order, at most `limit`; and
    /// whether more follow.
    pub(crate) fn created(
        &self,
        kind: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Created, bool)> {
        let start = encode_kind_prefix(kind);
        let end = kind_end(kind);
        let from = match after {
            Some(a) => Bound::Excluded(a),
            None => Bound::Included(start.as_slice()),
        };
        let (rows, more) =
            self.backing
                .range(Table::Created, from, Bound::Excluded(end.as_slice()), limit)?;
        let keys: Vec<Vec<u8>> = rows.into_iter().map(|(k, _)| k).collect();
        let records = self.backing.get_many(&keys)?;
        let mut out = Vec::with_capacity(keys.len());
        for (k, v) in keys.into_iter().zip(records) {
            if let Some(e) = v.map(|v| decode(&v)).transpose()?.and_then(|r| r.current) {
                out.push((k, e));
            }
        }
        Ok((out, more))
    }

    /// The kinds that hold at least one entity the run created.
    pub(crate) fn created_kinds(&self) -> Result<Vec<String>> {
        let candidates: Vec<String> = self
            .created_kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        let mut out = Vec::new();
        for kind in candidates {
            let (_, more) = self.created(&kind, None, 0)?;
            if more {
                out.push(kind);
            }
        }
        Ok(out)
    }

    /// Calls `visit` with every record, in key order, a page at a time.
    pub(crate) fn for_each(&self, mut visit: impl FnMut(Key, Record)) -> Result<()> {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let from = match &after {
                Some(a) => Bound::Excluded(a.as_slice()),
                None => Bound::Unbounded,
            };
            let (rows, more) = self
                .backing
                .range(Table::Records, from, Bound::Unbounded, 1000)?;
            for (_, v) in &rows {
                let record = decode(v)?;
                let Some(key) = record
                    .current
                    .as_ref()
                    .or(record.original.as_ref())
                    .map(|e| e.key.clone())
                else {
                    continue;
                };
                visit(key, record);
            }
            match (more, rows.last()) {
                (true, Some((k, _))) => after = Some(k.clone()),
                _ => return Ok(()),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::{Map, Value};

    fn entity(kind: &str, id: i64, n: i64) -> Entity {
        let mut value = Map::new();
        value.insert("n".into(), Value::Int(n));
        Entity::new(Key::new(kind, id).unwrap(), value)
    }

    fn record(original: Option<Entity>, current: Option<Entity>) -> Record {
        Record { original, current }
    }

    #[test]
    fn records_round_trip_and_created_entities_come_in_key_order() {
        let log = ChangeLog::new().unwrap();
        let changed = entity("a", 1, 1);
        log.put_all(&[
            (
                changed.key.clone(),
                record(Some(entity("a", 1, 0)), Some(changed.clone())),
            ),
            (
                Key::new("a", 3).unwrap(),
                record(None, Some(entity("a", 3, 3))),
            ),
            (
                Key::new("a", 2).unwrap(),
                record(None, Some(entity("a", 2, 2))),
            ),
            (
                Key::new("a", 4).unwrap(),
                record(Some(entity("a", 4, 4)), None),
            ),
            (
                Key::new("b", 1).unwrap(),
                record(None, Some(entity("b", 1, 1))),
            ),
        ])
        .unwrap();
        assert_eq!(
            log.get(&changed.key).unwrap(),
            Some(record(Some(entity("a", 1, 0)), Some(changed)))
        );
        assert_eq!(log.get(&Key::new("a", 9).unwrap()).unwrap(), None);
        // Created: ids 2 and 3 of kind a (1 existed, 4 was deleted), a page at a time.
        let (page, more) = log.created("a", None, 1).unwrap();
        assert_eq!(page[0].1, entity("a", 2, 2));
        assert!(more);
        let (page, more) = log.created("a", Some(&page[0].0), 5).unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].1, entity("a", 3, 3));
        assert!(!more);
        assert_eq!(log.created_kinds().unwrap(), vec!["a", "b"]);
        // A later write replaces the record: b:1 deleted again is no longer created.
        log.put_all(&[(Key::new("b", 1).unwrap(), record(None, None))])
            .unwrap();
        assert_eq!(log.created_kinds().unwrap(), vec!["a"]);
        let mut seen = Vec::new();
        log.for_each(|k, _| seen.push(k.to_string())).unwrap();
        assert_eq!(seen, vec!["a:1", "a:2", "a:3", "a:4"], "b:1 never existed");
    }

    #[cfg(feature = "embedded")]
    #[test]
    fn the_scratch_file_is_removed_with_the_log() {
        // A file left by a killed process goes when the next log is made; a live one stays.
        let dir = std::env::temp_dir();
        let orphan = dir.join("tern-dry-run-4000000000-test.redb");
        let live = dir.join(format!("tern-dry-run-{}-test.redb", std::process::id()));
        std::fs::write(&orphan, b"x").unwrap();
        std::fs::write(&live, b"x").unwrap();
        let log = ChangeLog::new().unwrap();
        if std::path::Path::new("/proc/self").exists() {
            assert!(!orphan.exists(), "the orphan is removed");
        }
        assert!(live.exists(), "a live process's file stays");
        std::fs::remove_file(&live).unwrap();
        let _ = std::fs::remove_file(&orphan);
        let path = log.backing.path.clone();
        assert!(path.exists());
        drop(log);
        assert!(!path.exists());
    }
}
