//! An in-memory [`Store`]: the reference implementation of the contract, for tests.
//!
//! Not persistent. Use the embedded store for anything that must survive the process.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{
    Advanced, AtomicBatchWithMeta, AtomicScope, AtomicWrites, BatchMetaOutcome, CountEstimate,
    Cursor, Error, ErrorKind, Features, FormerNameReads, KindRename, MetaCas, MetaChange,
    MetaEntry, MetaUpdate, Pushdown, PushdownPage, PushdownRequest, RenameKindPage,
    RenameKindRequest, Result, ScanPage, ScanRequest, StepsFrom, Store, StoreInfo, Write,
    WriteOutcome, key_range, pushdown,
};
use super::{Partition, Partitions};
use crate::model::keycode::{encode_key, encode_kind_prefix};
use crate::model::{Entity, Key};

#[derive(Debug, Default)]
struct Inner {
    entities: BTreeMap<Vec<u8>, Entity>,
    meta: BTreeMap<String, MetaEntry>,
}

/// What a write replaced: its encoded key and the entity stored there before, if any.
type Undo = (Vec<u8>, Option<Entity>);

impl Inner {
    /// Applies `writes` in order, one outcome each; records what each applied write
    /// replaced in `undo`, when given.
    fn apply(&mut self, writes: Vec<Write>, mut undo: Option<&mut Vec<Undo>>) -> Vec<WriteOutcome> {
        let mut outcomes = Vec::with_capacity(writes.len());
        for w in writes {
            let (key, new) = match w {
                Write::Put(e) => (encode_key(&e.key), Some(e)),
                Write::Insert(e) => {
                    let k = encode_key(&e.key);
                    if self.entities.contains_key(&k) {
                        outcomes.push(WriteOutcome::Conflict);
                        continue;
                    }
                    (k, Some(e))
                }
                Write::Replace { expected, new } => {
                    let k = encode_key(&expected.key);
                    if self.entities.get(&k) != Some(&expected) {
                        outcomes.push(WriteOutcome::Conflict);
                        continue;
                    }
                    (k, Some(new))
                }
                Write::Delete(key) => (encode_key(&key), None),
            };
            let before = match new {
                Some(e) => self.entities.insert(key.clone(), e),
                None => self.entities.remove(&key),
            };
            if let Some(undo) = undo.as_deref_mut() {
                undo.push((key, before));
            }
            outcomes.push(WriteOutcome::Applied);
        }
        outcomes
    }
}

/// An in-memory store. Clones share the same data.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Mutex<Inner>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; keep using it.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Decodes a cursor made by [`MemoryStore`] or the embedded store: the hex of
/// the last encoded key examined.
pub(crate) fn decode_cursor(cursor: &Cursor) -> Result<Vec<u8>> {
    hex::decode(&cursor.0).map_err(|e| {
        Error::new(
            ErrorKind::InvalidCursor,
            format!("cursor {:?} is not one this store made", cursor.0),
        )
        .with_source(e)
    })
}

#[async_trait]
impl Store for MemoryStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: "memory",
            location: "memory:".to_owned(),
        }
    }

    /// Every facet a store in this process can have: scans in id order,
    /// pushdown, atomic writes over any keys, a batch with its checkpoint in
    /// one step, kind renames, lazy reads of former names, an exact count.
    /// The clock is this machine's, the only one there is; no schema.
    fn features(&self) -> Features<'_> {
        Features {
            former_name_reads: Some(self),
            ..Features::in_process(self)
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let inner = self.lock();
        let mut kinds: Vec<String> = inner
            .entities
            .values()
            .map(|e| e.key.kind.clone())
            .collect();
        kinds.dedup();
        Ok(kinds)
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        self.scan_range(kind, request, None)
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        Ok(self.lock().entities.get(&encode_key(key)).cloned())
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        Ok(self.lock().apply(writes, None))
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        Ok(self.lock().meta.get(name).cloned())
    }

    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        let MetaChange { expected, value } = change;
        let mut inner = self.lock();
        let current = inner.meta.get(name).cloned();
        if current.as_ref().map(|e| e.revision) != expected {
            return Ok(MetaCas::Conflict(current));
        }
        match value {
            Some(v) => {
                let revision = expected.unwrap_or(0) + 1;
                inner.meta.insert(
                    name.to_owned(),
                    MetaEntry {
                        value: v.to_owned(),
                        revision,
                    },
                );
                Ok(MetaCas::Applied(revision))
            }
            None => {
                inner.meta.remove(name);
                Ok(MetaCas::Applied(0))
            }
        }
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self
            .lock()
            .meta
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect())
    }
}

#[async_trait]
impl CountEstimate for MemoryStore {
    /// Exact: the kind's entities are counted in memory.
    async fn estimate_count(&self, kind: &str) -> Result<u64> {
        let prefix = encode_kind_prefix(kind);
        let inner = self.lock();
        let n = inner
            .entities
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .count();
        Ok(n as u64)
    }
}

#[async_trait]
impl AtomicBatchWithMeta for MemoryStore {
    /// Under the store's lock: the revision is checked first, the writes applied,
    /// the document written; a failing `meta.value` undoes the writes.
    async fn write_batch_with_meta(
        &self,
        writes: Vec<Write>,
        meta: MetaUpdate,
    ) -> Result<BatchMetaOutcome> {
        let mut inner = self.lock();
        let current = inner.meta.get(&meta.name).cloned();
        if current.as_ref().map(|e| e.revision) != meta.expected {
            return Ok(BatchMetaOutcome::Conflict {
                current,
                writes: None,
            });
        }
        let mut undo = Vec::new();
        let outcomes = inner.apply(writes, Some(&mut undo));
        let value = match (meta.value)(&outcomes) {
            Ok(value) => value,
            Err(e) => {
                for (k, before) in undo.into_iter().rev() {
                    match before {
                        Some(e) => inner.entities.insert(k, e),
                        None => inner.entities.remove(&k),
                    };
                }
                return Err(e);
            }
        };
        let revision = meta.expected.unwrap_or(0) + 1;
        inner.meta.insert(meta.name, MetaEntry { value, revision });
        Ok(BatchMetaOutcome::Applied {
            writes: outcomes,
            revision,
        })
    }
}

#[async_trait]
impl AtomicWrites for MemoryStore {
    fn scope(&self) -> AtomicScope {
        AtomicScope::AnyKeys
    }

    /// Under the store's lock: guards checked, writes applied, undone on a conflict.
    async fn write_atomic(
        &self,
        guards: Vec<super::Guard>,
        writes: Vec<Write>,
    ) -> Result<WriteOutcome> {
        let mut inner = self.lock();
        let holds = guards.iter().all(|g| {
            let stored = inner.entities.get(&encode_key(g.key()));
            match g {
                super::Guard::Absent(_) => stored.is_none(),
                super::Guard::Unchanged(e) => stored == Some(e),
            }
        });
        if !holds {
            return Ok(WriteOutcome::Conflict);
        }
        let mut undo = Vec::new();
        let outcomes = inner.apply(writes, Some(&mut undo));
        if outcomes.contains(&WriteOutcome::Conflict) {
            for (k, before) in undo.into_iter().rev() {
                match before {
                    Some(e) => inner.entities.insert(k, e),
                    None => inner.entities.remove(&k),
                };
            }
            return Ok(WriteOutcome::Conflict);
        }
        Ok(WriteOutcome::Applied)
    }
}

#[async_trait]
impl FormerNameReads for MemoryStore {
    async fn get_advanced(
        &self,
        key: &Key,
        formers: &[Key],
        steps: Option<&StepsFrom>,
    ) -> Result<Option<Advanced>> {
        let mut inner = self.lock();
        let here = encode_key(key);
        let mut moved = false;
        if !inner.entities.contains_key(&here) {
            for former in formers {
                if let Some(mut e) = inner.entities.remove(&encode_key(former)) {
                    e.key = key.clone();
                    inner.entities.insert(here.clone(), e);
                    moved = true;
                    break;
                }
            }
        }
        let Some(e) = inner.entities.get_mut(&here) else {
            return Ok(None);
        };
        let stepped = steps.is_some_and(|steps| {
            let mut changed = vec![0; steps.steps.len()];
            pushdown::advance(steps.from, &steps.steps, e, &mut changed)
        });
        Ok(Some(Advanced {
            entity: e.clone(),
            migrated: moved || stepped,
        }))
    }
}

#[async_trait]
impl Pushdown for MemoryStore {
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.update_range(request, None)
    }
}

#[async_trait]
impl KindRename for MemoryStore {
    /// Moves each entity of the batch under its new key in one step (the store's lock).
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        let mut page = RenameKindPage::default();
        if request.limit == 0 || request.from == request.to {
            return Ok(page);
        }
        let prefix = encode_kind_prefix(&request.from);
        let start = match &request.cursor {
            Some(c) => std::ops::Bound::Excluded(decode_cursor(c)?),
            None => std::ops::Bound::Included(prefix.clone()),
        };
        let mut inner = self.lock();
        let mut batch: Vec<Vec<u8>> = inner
            .entities
            .range((start, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&prefix))
            .take(request.limit + 1)
            .map(|(k, _)| k.clone())
            .collect();
        let more = batch.len() > request.limit;
        batch.truncate(request.limit);
        for old in &batch {
            let Some(entity) = inner.entities.get(old) else {
                continue;
            };
            let new_key = Key {
                kind: request.to.clone(),
                id: entity.key.id.clone(),
            };
            let encoded = encode_key(&new_key);
            if inner.entities.contains_key(&encoded) {
                page.collisions.push(entity.key.clone());
                continue;
            }
            if let Some(mut entity) = inner.entities.remove(old) {
                entity.key = new_key;
                inner.entities.insert(encoded, entity);
                page.renamed += 1;
            }
        }
        if more {
            page.cursor = batch.last().map(|k| Cursor(hex::encode(k)));
        }
        Ok(page)
    }
}

/// Key ranges ([`key_range`]): the split reads the kind's keys in memory.
#[async_trait]
impl Partitions for MemoryStore {
    async fn split(&self, kind: &str, count: usize) -> Result<Vec<Partition>> {
        let prefix = encode_kind_prefix(kind);
        let inner = self.lock();
        let keys = || {
            inner
                .entities
                .range(prefix.clone()..)
                .map(|(k, _)| k)
                .take_while(|k| k.starts_with(&prefix))
        };
        let total = keys().count();
        Ok(key_range::split(
            kind,
            keys().map(Vec::as_slice),
            total,
            count,
        ))
    }

    async fn scan_partition(
        &self,
        kind: &str,
        partition: &Partition,
        mut request: ScanRequest,
    ) -> Result<ScanPage> {
        let range = key_range::parse(kind, partition)?;
        request.cursor = range.start(request.cursor.as_ref());
        self.scan_range(kind, request, range.end().as_deref())
    }

    async fn update_partition(
        &self,
        partition: &Partition,
        mut request: PushdownRequest,
    ) -> Result<PushdownPage> {
        let range = key_range::parse(&request.kind, partition)?;
        request.cursor = range.start(request.cursor.as_ref());
        self.update_range(request, range.end().as_deref())
    }
}

impl MemoryStore {
    /// A page of a scan of `kind` that stops before `end` (an encoded key), if given.
    fn scan_range(&self, kind: &str, request: ScanRequest, end: Option<&[u8]>) -> Result<ScanPage> {
        let prefix = encode_kind_prefix(kind);
        let start = match &request.cursor {
            Some(c) => std::ops::Bound::Excluded(decode_cursor(c)?),
            None => std::ops::Bound::Included(prefix.clone()),
        };
        let inner = self.lock();
        let mut entities = Vec::new();
        let mut last = None;
        let mut exhausted = true;
        for (k, e) in inner.entities.range((start, std::ops::Bound::Unbounded)) {
            if !k.starts_with(&prefix) || end.is_some_and(|end| k.as_slice() >= end) {
                break;
            }
            if entities.len() >= request.limit.max(1) {
                exhausted = false;
                break;
            }
            last = Some(k.clone());
            if request.filter.matches(e) {
                entities.push(e.clone());
            }
        }
        let cursor = if exhausted {
            None
        } else {
            last.map(|k| Cursor(hex::encode(k)))
        };
        Ok(ScanPage { entities, cursor })
    }

    /// One batch of an update in place of `request.kind` that stops before `end`, if given.
    fn update_range(&self, request: PushdownRequest, end: Option<&[u8]>) -> Result<PushdownPage> {
        let target = pushdown::target_version(&request)?;
        let prefix = encode_kind_prefix(&request.kind);
        let start = match &request.cursor {
            Some(c) => std::ops::Bound::Excluded(decode_cursor(c)?),
            None => std::ops::Bound::Included(prefix.clone()),
        };
        let limit = request.limit.max(1);
        let mut page = PushdownPage::empty(request.steps.len(), None);
        let mut inner = self.lock();
        let mut range = inner
            .entities
            .range_mut((start, std::ops::Bound::Unbounded))
            .take_while(|(k, _)| {
                k.starts_with(&prefix) && end.is_none_or(|end| k.as_slice() < end)
            });
        let mut last = None;
        for (k, e) in range.by_ref().take(limit) {
            last = Some(k.clone());
            let before: u64 = page.changed.iter().sum();
            if e.version >= request.from
                && e.version < target
                && pushdown::advance(request.from, &request.steps, e, &mut page.changed)
            {
                page.advanced += 1;
                if page.changed.iter().sum::<u64>() > before {
                    page.changed_entities += 1;
                }
            }
        }
        if range.next().is_some() {
            page.cursor = last.map(|k| Cursor(hex::encode(k)));
        }
        Ok(page)
    }
}
