//! The blocking operations of the embedded store, one redb transaction each.

use std::ops::Bound;

use redb::ReadableTable;

use super::{ENTITIES, Inner, META, map_redb};
use crate::model::codec::{
    CodecError, decode_entity, decode_entity_projected, decode_version, encode_entity,
};
use crate::model::keycode::{encode_key, encode_kind_prefix};
use crate::model::{Entity, Key};
use crate::store::memory::decode_cursor;
use crate::store::{
    BatchMetaOutcome, Cursor, Error, ErrorKind, Filter, MetaCas, MetaChange, MetaEntry, MetaUpdate,
    PushdownPage, PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage,
    ScanRequest, Write, WriteOutcome, pushdown,
};

/// A scan page examines at most this many entities per entity it may return,
/// so that a very selective filter cannot make one page read a whole kind.
const EXAMINE_PER_RESULT: usize = 16;
/// ... but at least this many.
const MIN_EXAMINE: usize = 1024;

/// The smallest byte string above every key that starts with `prefix`, an
/// [`encode_kind_prefix`] (which ends in `00 00`, a pair no kind's escaped
/// bytes contain): the same prefix ending in `00 01`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    if let Some(last) = end.last_mut() {
        *last = 0x01;
    }
    end
}

/// Splits the kind off an encoded key: the kind and the length of its encoded prefix.
fn split_kind(key: &[u8]) -> Option<(String, usize)> {
    let mut kind = Vec::with_capacity(key.len());
    let mut i = 0;
    while i < key.len() {
        match key[i] {
            0 => match key.get(i + 1) {
                Some(0) => return String::from_utf8(kind).ok().map(|k| (k, i + 2)),
                Some(0xFF) => {
                    kind.push(0);
                    i += 2;
                }
                _ => return None,
            },
            b => {
                kind.push(b);
                i += 1;
            }
        }
    }
    None
}

/// A stored metadata row as the store interface gives it.
fn meta_entry((revision, value): (u64, &str)) -> MetaEntry {
    MetaEntry {
        value: value.to_owned(),
        revision,
    }
}

impl Inner {
    fn begin_read(&self) -> Result<redb::ReadTransaction> {
        self.db
            .begin_read()
            .map_err(self.fail("begin a read transaction"))
    }

    /// The entity table, in a read transaction of its own (the table keeps it open).
    fn read_entities(&self) -> Result<redb::ReadOnlyTable<&'static [u8], &'static [u8]>> {
        self.begin_read()?
            .open_table(ENTITIES)
            .map_err(self.fail("open the entity table"))
    }

    /// The metadata table, in a read transaction of its own (the table keeps it open).
    fn read_meta(&self) -> Result<redb::ReadOnlyTable<&'static str, (u64, &'static str)>> {
        self.begin_read()?
            .open_table(META)
            .map_err(self.fail("open the metadata table"))
    }

    /// The entity table of a write transaction.
    fn write_entities<'t>(
        &self,
        txn: &'t redb::WriteTransaction,
    ) -> Result<redb::Table<'t, &'static [u8], &'static [u8]>> {
        txn.open_table(ENTITIES)
            .map_err(self.fail("open the entity table"))
    }

    /// The metadata table of a write transaction.
    fn write_meta<'t>(
        &self,
        txn: &'t redb::WriteTransaction,
    ) -> Result<redb::Table<'t, &'static str, (u64, &'static str)>> {
        txn.open_table(META)
            .map_err(self.fail("open the metadata table"))
    }

    fn begin_write(&self) -> Result<redb::WriteTransaction> {
        self.db
            .writable(&self.location)?
            .begin_write()
            .map_err(self.fail("begin a write transaction"))
    }

    /// Commits `txn` when it wrote something (`commit`), else aborts it.
    fn end(
        &self,
        txn: redb::WriteTransaction,
        commit: bool,
        committing: &'static str,
        ending: &'static str,
    ) -> Result<()> {
        if commit {
            txn.commit().map_err(self.fail(committing))
        } else {
            txn.abort().map_err(self.fail(ending))
        }
    }

    /// A closure mapping a redb error to a store error whose message names `what`.
    fn fail<E: Into<redb::Error>>(&self, what: &'static str) -> impl FnOnce(E) -> Error + '_ {
        move |e| map_redb(e, what, &self.location)
    }

    fn corrupt(&self, kind: &str, key: &[u8], e: CodecError) -> Error {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "the stored entity {} of kind {kind:?} cannot be decoded",
                hex::encode(key)
            ),
        )
        .with_context("store", self.location.clone())
        .with_context("kind", kind.to_owned())
        .with_context("key", hex::encode(key))
        .with_source(e)
    }

    fn encode(&self, entity: &Entity, out: &mut Vec<u8>) -> Result<()> {
        encode_entity(&entity.key.id, entity.version, &entity.value, out).map_err(|e| {
            Error::new(
                ErrorKind::Rejected,
                format!("cannot store entity {}", entity.key),
            )
            .with_context("store", self.location.clone())
            .with_context("key", entity.key.to_string())
            .with_source(e)
        })
    }

    /// Hands `each` the rows of `table` from `start` up to `end` (excluded), at most `limit`
    /// of them (`what` names the operation in errors); whether the range ended within them.
    fn each_row(
        &self,
        table: &impl ReadableTable<&'static [u8], &'static [u8]>,
        (start, end): (&Bound<Vec<u8>>, &[u8]),
        limit: usize,
        what: &'static str,
        mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<bool> {
        let bounds = (start.as_ref().map(Vec::as_slice), Bound::Excluded(end));
        let range = table.range::<&[u8]>(bounds).map_err(self.fail(what))?;
        for (examined, item) in range.enumerate() {
            let (key, value) = item.map_err(self.fail(what))?;
            if examined >= limit {
                return Ok(false);
            }
            each(key.value(), value.value())?;
        }
        Ok(true)
    }

    /// Where a scan of `kind` starts: after the cursor, else at the kind's first key.
    fn start_bound(
        &self,
        kind: &str,
        prefix: &[u8],
        cursor: Option<&Cursor>,
    ) -> Result<Bound<Vec<u8>>> {
        match cursor {
            None => Ok(Bound::Included(prefix.to_vec())),
            Some(c) => {
                let after = decode_cursor(c)?;
                if !after.starts_with(prefix) {
                    return Err(Error::new(
                        ErrorKind::InvalidCursor,
                        format!("cursor {:?} is not a cursor of kind {kind:?}", c.0),
                    )
                    .with_context("store", self.location.clone()));
                }
                Ok(Bound::Excluded(after))
            }
        }
    }

    pub(super) fn create_tables(&self) -> Result<()> {
        let txn = self.begin_write()?;
        txn.open_table(ENTITIES)
            .map_err(self.fail("create the entity table"))?;
        txn.open_table(META)
            .map_err(self.fail("create the metadata table"))?;
        txn.commit().map_err(self.fail("commit the new tables"))
    }

    pub(super) fn kinds(&self) -> Result<Vec<String>> {
        let table = self.read_entities()?;
        let mut kinds = Vec::new();
        let mut from: Option<Vec<u8>> = None;
        loop {
            let bounds = (
                from.as_deref().map_or(Bound::Unbounded, Bound::Included),
                Bound::Unbounded,
            );
            let mut range = table
                .range::<&[u8]>(bounds)
                .map_err(self.fail("list kinds"))?;
            let Some(item) = range.next() else { break };
            let (key, _) = item.map_err(self.fail("list kinds"))?;
            let key = key.value();
            let Some((kind, prefix_len)) = split_kind(key) else {
                return Err(Error::new(
                    ErrorKind::InvalidData,
                    format!("the stored key {} names no kind", hex::encode(key)),
                )
                .with_context("store", self.location.clone())
                .with_context("key", hex::encode(key)));
            };
            kinds.push(kind);
            from = Some(prefix_end(&key[..prefix_len]));
        }
        Ok(kinds)
    }

    /// With `keep` (sorted), only those top-level properties are decoded:
    /// the caller includes those the filter's conditions test.
    pub(super) fn scan(
        &self,
        kind: &str,
        request: &ScanRequest,
        keep: Option<&[String]>,
        until: Option<&[u8]>,
    ) -> Result<ScanPage> {
        let prefix = encode_kind_prefix(kind);
        let end = until.map_or_else(|| prefix_end(&prefix), <[u8]>::to_vec);
        let start = self.start_bound(kind, &prefix, request.cursor.as_ref())?;
        let limit = request.limit.max(1);
        let budget = limit.saturating_mul(EXAMINE_PER_RESULT).max(MIN_EXAMINE);

        let table = self.read_entities()?;
        let bounds = (
            start.as_ref().map(Vec::as_slice),
            Bound::Excluded(end.as_slice()),
        );
        let range = table.range::<&[u8]>(bounds).map_err(self.fail("scan"))?;

        let mut entities = Vec::new();
        let mut last = Vec::new();
        let mut exhausted = true;
        for (examined, item) in range.enumerate() {
            let (key, value) = item.map_err(self.fail("scan"))?;
            if entities.len() >= limit || examined >= budget {
                exhausted = false;
                break;
            }
            let (key, bytes) = (key.value(), value.value());
            last.clear();
            last.extend_from_slice(key);
            let version = decode_version(bytes).map_err(|e| self.corrupt(kind, key, e))?;
            if !request.filter.version.matches(version) {
                continue;
            }
            let decoded = match keep {
                None => decode_entity(bytes),
                Some(keep) => decode_entity_projected(bytes, |name| {
                    keep.binary_search_by(|k| k.as_str().cmp(name)).is_ok()
                }),
            };
            let (id, version, value) = decoded.map_err(|e| self.corrupt(kind, key, e))?;
            if request
                .filter
                .conditions
                .iter()
                .all(|c| c.matches_map(&value))
            {
                entities.push(Entity {
                    key: Key {
                        kind: kind.to_owned(),
                        id,
                    },
                    version,
                    value,
                });
            }
        }
        let cursor = (!exhausted).then(|| Cursor(hex::encode(&last)));
        Ok(ScanPage { entities, cursor })
    }

    /// How many entities of `kind` pass `filter` (every one with `None`), in
    /// one read transaction: a snapshot. Decodes each entity's version when
    /// the filter names one, and the whole entity only for conditions.
    pub(super) fn count(&self, kind: &str, filter: Option<&Filter>) -> Result<u64> {
        let prefix = encode_kind_prefix(kind);
        let end = prefix_end(&prefix);
        let table = self.read_entities()?;
        let range = table
            .range::<&[u8]>(prefix.as_slice()..end.as_slice())
            .map_err(self.fail("count"))?;
        let mut n = 0u64;
        for item in range {
            let (key, value) = item.map_err(self.fail("count"))?;
            let Some(filter) = filter else {
                n += 1;
                continue;
            };
            let (key, bytes) = (key.value(), value.value());
            let version = decode_version(bytes).map_err(|e| self.corrupt(kind, key, e))?;
            if !filter.version.matches(version) {
                continue;
            }
            if !filter.conditions.is_empty() {
                let (_, _, value) = decode_entity(bytes).map_err(|e| self.corrupt(kind, key, e))?;
                if !filter.conditions.iter().all(|c| c.matches_map(&value)) {
                    continue;
                }
            }
            n += 1;
        }
        Ok(n)
    }

    pub(super) fn get(&self, key: Key) -> Result<Option<Entity>> {
        let encoded = encode_key(&key);
        let table = self.read_entities()?;
        let Some(stored) = table.get(encoded.as_slice()).map_err(self.fail("get"))? else {
            return Ok(None);
        };
        let (_, version, value) =
            decode_entity(stored.value()).map_err(|e| self.corrupt(&key.kind, &encoded, e))?;
        Ok(Some(Entity {
            key,
            version,
            value,
        }))
    }

    pub(super) fn write_batch(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>> {
        let txn = self.begin_write()?;
        let outcomes = {
            let mut table = self.write_entities(&txn)?;
            self.apply_writes(&mut table, writes)?
        };
        let dirty = outcomes.contains(&WriteOutcome::Applied);
        self.end(txn, dirty, "commit a write batch", "end a write batch")?;
        Ok(outcomes)
    }

    /// The writes and the metadata compare-and-set in one write transaction:
    /// the revision is checked first (a conflict writes nothing), then the
    /// writes are applied and the document written from their outcomes, and
    /// the whole is committed with one fsync. Any error aborts all of it.
    pub(super) fn write_batch_with_meta(
        &self,
        writes: &[Write],
        meta: &MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        let txn = self.begin_write()?;
        let outcome = {
            let mut meta_table = self.write_meta(&txn)?;
            let current = meta_table
                .get(meta.name.as_str())
                .map_err(self.fail("read metadata"))?
                .map(|stored| meta_entry(stored.value()));
            if current.as_ref().map(|e| e.revision) == meta.expected {
                let revision = self.next_revision(&meta.name, meta.expected)?;
                let mut table = self.write_entities(&txn)?;
                let outcomes = self.apply_writes(&mut table, writes)?;
                let value = (meta.value)(&outcomes)?;
                meta_table
                    .insert(meta.name.as_str(), (revision, value.as_str()))
                    .map_err(self.fail("write metadata"))?;
                BatchMetaOutcome::Applied {
                    writes: outcomes,
                    revision,
                }
            } else {
                BatchMetaOutcome::Conflict {
                    current,
                    writes: None,
                }
            }
        };
        self.end(
            txn,
            matches!(outcome, BatchMetaOutcome::Applied { .. }),
            "commit a write batch with its metadata",
            "end a write batch with its metadata",
        )?;
        Ok(outcome)
    }

    /// Guards and writes in one write transaction, committed only when every
    /// guard holds and every write applies ([`crate::store::AtomicWrites::write_atomic`]).
    pub(super) fn write_atomic(
        &self,
        guards: &[crate::store::Guard],
        writes: &[Write],
    ) -> Result<WriteOutcome> {
        let txn = self.begin_write()?;
        let applied = {
            let mut table = self.write_entities(&txn)?;
            let mut holds = true;
            let mut buf = Vec::with_capacity(256);
            for guard in guards {
                let k = encode_key(guard.key());
                let stored = table
                    .get(k.as_slice())
                    .map_err(self.fail("check a guard"))?;
                holds &= match guard {
                    crate::store::Guard::Absent(_) => stored.is_none(),
                    crate::store::Guard::Unchanged(e) => {
                        encode_entity(&e.key.id, e.version, &e.value, &mut buf).is_ok()
                            && stored.is_some_and(|s| s.value() == buf.as_slice())
                    }
                };
                if !holds {
                    break;
                }
            }
            holds
                && !self
                    .apply_writes(&mut table, writes)?
                    .contains(&WriteOutcome::Conflict)
        };
        self.end(
            txn,
            applied,
            "commit an atomic write",
            "end an atomic write",
        )?;
        Ok(if applied {
            WriteOutcome::Applied
        } else {
            WriteOutcome::Conflict
        })
    }

    /// The revision a document at `expected` gets when written.
    fn next_revision(&self, name: &str, expected: Option<u64>) -> Result<u64> {
        expected.unwrap_or(0).checked_add(1).ok_or_else(|| {
            Error::new(
                ErrorKind::Unexpected,
                format!("the revision of metadata {name:?} overflows"),
            )
            .with_context("store", self.location.clone())
        })
    }

    /// Applies `writes` in order to the entity table of a write transaction.
    fn apply_writes(
        &self,
        table: &mut redb::Table<'_, &'static [u8], &'static [u8]>,
        writes: &[Write],
    ) -> Result<Vec<WriteOutcome>> {
        let mut outcomes = Vec::with_capacity(writes.len());
        {
            let mut buf = Vec::with_capacity(256);
            let mut expected_buf = Vec::with_capacity(256);
            for write in writes {
                let outcome = match write {
                    Write::Put(e) => {
                        self.encode(e, &mut buf)?;
                        table
                            .insert(encode_key(&e.key).as_slice(), buf.as_slice())
                            .map_err(self.fail("put"))?;
                        WriteOutcome::Applied
                    }
                    Write::Insert(e) => {
                        let k = encode_key(&e.key);
                        if table
                            .get(k.as_slice())
                            .map_err(self.fail("insert"))?
                            .is_some()
                        {
                            WriteOutcome::Conflict
                        } else {
                            self.encode(e, &mut buf)?;
                            table
                                .insert(k.as_slice(), buf.as_slice())
                                .map_err(self.fail("insert"))?;
                            WriteOutcome::Applied
                        }
                    }
                    Write::Replace { expected, new } => {
                        let k = encode_key(&expected.key);
                        // The encoding is canonical: equal bytes mean equal entities.
                        // An `expected` that cannot be encoded cannot be what is stored.
                        let encodable = encode_entity(
                            &expected.key.id,
                            expected.version,
                            &expected.value,
                            &mut expected_buf,
                        )
                        .is_ok();
                        let unchanged = encodable
                            && table
                                .get(k.as_slice())
                                .map_err(self.fail("replace"))?
                                .is_some_and(|stored| stored.value() == expected_buf.as_slice());
                        if unchanged {
                            self.encode(new, &mut buf)?;
                            table
                                .insert(k.as_slice(), buf.as_slice())
                                .map_err(self.fail("replace"))?;
                            WriteOutcome::Applied
                        } else {
                            WriteOutcome::Conflict
                        }
                    }
                    Write::Delete(key) => {
                        table
                            .remove(encode_key(key).as_slice())
                            .map_err(self.fail("delete"))?;
                        WriteOutcome::Applied
                    }
                };
                outcomes.push(outcome);
            }
        }
        Ok(outcomes)
    }

    pub(super) fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        let table = self.read_meta()?;
        let entry = table
            .get(name)
            .map_err(self.fail("read metadata"))?
            .map(|stored| meta_entry(stored.value()));
        Ok(entry)
    }

    pub(super) fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        let MetaChange { expected, value } = change;
        let txn = self.begin_write()?;
        let outcome = {
            let mut table = self.write_meta(&txn)?;
            let current = table
                .get(name)
                .map_err(self.fail("read metadata"))?
                .map(|stored| meta_entry(stored.value()));
            if current.as_ref().map(|e| e.revision) != expected {
                MetaCas::Conflict(current)
            } else if let Some(v) = value {
                let revision = self.next_revision(name, expected)?;
                table
                    .insert(name, (revision, v))
                    .map_err(self.fail("write metadata"))?;
                MetaCas::Applied(revision)
            } else {
                table.remove(name).map_err(self.fail("delete metadata"))?;
                MetaCas::Applied(0)
            }
        };
        self.end(
            txn,
            matches!(outcome, MetaCas::Applied(_)),
            "commit metadata",
            "end a metadata transaction",
        )?;
        Ok(outcome)
    }

    pub(super) fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        let table = self.read_meta()?;
        let mut names = Vec::new();
        for item in table
            .range::<&str>(prefix..)
            .map_err(self.fail("list metadata"))?
        {
            let (name, _) = item.map_err(self.fail("list metadata"))?;
            let name = name.value();
            if !name.starts_with(prefix) {
                break;
            }
            names.push(name.to_owned());
        }
        Ok(names)
    }

    /// The kind's keys split into at most `count` ranges (nothing is decoded).
    pub(super) fn split(&self, kind: &str, count: usize) -> Result<Vec<crate::store::Partition>> {
        let prefix = encode_kind_prefix(kind);
        let end = prefix_end(&prefix);
        let table = self.read_entities()?;
        let mut keys = Vec::new();
        for item in table
            .range::<&[u8]>(prefix.as_slice()..end.as_slice())
            .map_err(self.fail("split"))?
        {
            let (key, _) = item.map_err(self.fail("split"))?;
            keys.push(key.value().to_vec());
        }
        Ok(crate::store::key_range::split(
            kind,
            keys.iter().map(Vec::as_slice),
            keys.len(),
            count,
        ))
    }

    /// One batch of an update in place; with `until`, of the keys before it only.
    pub(super) fn update_in_place(
        &self,
        request: &PushdownRequest,
        until: Option<&[u8]>,
    ) -> Result<PushdownPage> {
        let target = pushdown::target_version(request)?;
        let kind = request.kind.as_str();
        let prefix = encode_kind_prefix(kind);
        let end = until.map_or_else(|| prefix_end(&prefix), <[u8]>::to_vec);
        let start = self.start_bound(kind, &prefix, request.cursor.as_ref())?;
        let limit = request.limit.max(1);
        let mut page = PushdownPage::empty(request.steps.len(), None);

        let txn = self.begin_write()?;
        {
            let mut table = self.write_entities(&txn)?;
            // Read the batch first: redb does not write a table while iterating it.
            let mut pending = Vec::new();
            let mut last = Vec::new();
            let range = (&start, end.as_slice());
            let exhausted =
                self.each_row(&table, range, limit, "update in place", |key, bytes| {
                    last.clear();
                    last.extend_from_slice(key);
                    let version = decode_version(bytes).map_err(|e| self.corrupt(kind, key, e))?;
                    if version < request.from || version >= target {
                        return Ok(());
                    }
                    let (id, version, value) =
                        decode_entity(bytes).map_err(|e| self.corrupt(kind, key, e))?;
                    pending.push((
                        key.to_vec(),
                        Entity {
                            key: Key {
                                kind: kind.to_owned(),
                                id,
                            },
                            version,
                            value,
                        },
                    ));
                    Ok(())
                })?;
            let mut buf = Vec::with_capacity(256);
            for (key, mut entity) in pending {
                let before: u64 = page.changed.iter().sum();
                if pushdown::advance(request.from, &request.steps, &mut entity, &mut page.changed) {
                    self.encode(&entity, &mut buf)?;
                    table
                        .insert(key.as_slice(), buf.as_slice())
                        .map_err(self.fail("update in place"))?;
                    page.advanced += 1;
                    if page.changed.iter().sum::<u64>() > before {
                        page.changed_entities += 1;
                    }
                }
            }
            page.cursor = (!exhausted).then(|| Cursor(hex::encode(&last)));
        }
        self.end(
            txn,
            page.advanced > 0,
            "commit an update in place",
            "end an update in place",
        )?;
        Ok(page)
    }
}

impl Inner {
    /// Moves one batch of `from`'s entities under `to`'s prefix in one write
    /// transaction. The stored bytes hold the id, version and value but not the
    /// kind, so they move as they are.
    pub(super) fn rename_kind(&self, request: &RenameKindRequest) -> Result<RenameKindPage> {
        let mut page = RenameKindPage::default();
        if request.limit == 0 || request.from == request.to {
            return Ok(page);
        }
        let from = request.from.as_str();
        let prefix = encode_kind_prefix(from);
        let to_prefix = encode_kind_prefix(&request.to);
        let end = prefix_end(&prefix);
        let start = self.start_bound(from, &prefix, request.cursor.as_ref())?;
        let txn = self.begin_write()?;
        {
            let mut table = self.write_entities(&txn)?;
            // Read the batch first: redb does not write a table while iterating it.
            let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let range = (&start, end.as_slice());
            let exhausted =
                self.each_row(&table, range, request.limit, "rename kind", |k, v| {
                    batch.push((k.to_vec(), v.to_vec()));
                    Ok(())
                })?;
            for (old, bytes) in &batch {
                let mut new_key = to_prefix.clone();
                new_key.extend_from_slice(&old[prefix.len()..]);
                if table
                    .get(new_key.as_slice())
                    .map_err(self.fail("rename kind"))?
                    .is_some()
                {
                    let (id, _, _) =
                        decode_entity(bytes).map_err(|e| self.corrupt(from, old, e))?;
                    page.collisions.push(Key {
                        kind: from.to_owned(),
                        id,
                    });
                    continue;
                }
                table
                    .insert(new_key.as_slice(), bytes.as_slice())
                    .map_err(self.fail("rename kind"))?;
                table
                    .remove(old.as_slice())
                    .map_err(self.fail("rename kind"))?;
                page.renamed += 1;
            }
            if !exhausted {
                page.cursor = batch.last().map(|(k, _)| Cursor(hex::encode(k)));
            }
        }
        self.end(
            txn,
            page.renamed > 0,
            "commit a kind rename",
            "end a kind rename",
        )?;
        Ok(page)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn split_kind_inverts_the_prefix() {
        for kind in ["a", "user", "with\0nul", "é", "x\u{1}y"] {
            let prefix = encode_kind_prefix(kind);
            let key = encode_key(
                &Key::new("placeholder", 1)
                    .map(|k| Key {
                        kind: kind.to_owned(),
                        ..k
                    })
                    .unwrap(),
            );
            assert_eq!(split_kind(&key), Some((kind.to_owned(), prefix.len())));
            assert!(prefix_end(&prefix).as_slice() > key.as_slice());
            assert!(!prefix_end(&prefix).starts_with(&prefix));
        }
        assert_eq!(split_kind(b"abc"), None);
        assert_eq!(split_kind(b"a\0\x05"), None);
    }
}
