//! The dry-run store: reads through to a real store, keeps every write to itself.
//!
//! `tern plan` and `tern up --dry-run` run the real engine over an
//! [`OverlayStore`], so what they report is exactly what `tern up` would do,
//! computed by the same code, and nothing reaches the real store. The writes
//! go to a change log in a temporary file (see [`super::changelog`]), so
//! memory does not grow with the number of entities the migration changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;

use super::changelog::{ChangeLog, Record};
use crate::model::{Entity, Key};
use crate::store::memory::MemoryStore;
use crate::store::{
    AtomicScope, AtomicWrites, Cursor, Error, ErrorKind, Features, Guard, KindRename, MetaCas,
    MetaChange, MetaEntry, RenameKindPage, RenameKindRequest, Result, ScanPage, ScanRequest, Store,
    StoreInfo, Write, WriteOutcome,
};

/// Scan cursors of the overlay: `b:<cursor of the base>` while the base's
/// entities are read, then `o:<hex of the last encoded key>` over the entities
/// the run created (a kind rename's new keys), which the base does not hold.
const BASE_CURSOR: &str = "b:";
const CREATED_CURSOR: &str = "o:";

/// One entity a dry run changed: as it was in the real store and as it would become.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// As read from the real store (`None`: it would be created).
    pub before: Option<Entity>,
    /// As the migration would leave it (`None`: deleted).
    pub after: Option<Entity>,
}

/// A store that reads from `base` and keeps all writes to itself: entities in a
/// change log, metadata in memory.
#[derive(Debug, Clone)]
pub struct OverlayStore {
    base: Arc<dyn Store>,
    log: Arc<ChangeLog>,
    meta: MemoryStore,
}

impl OverlayStore {
    /// An overlay over `base`, starting with a copy of `base`'s tern state.
    ///
    /// # Errors
    /// A store error reading the base's state.
    pub async fn new(base: Arc<dyn Store>) -> Result<OverlayStore> {
        let meta = MemoryStore::new();
        for name in base.meta_list("").await? {
            if let Some(entry) = base.meta_get(&name).await? {
                // Re-create at the same revision so that revisions read from the base stay valid.
                let mut rev = None;
                for _ in 0..entry.revision {
                    if let MetaCas::Applied(r) = meta
                        .meta_cas(
                            &name,
                            MetaChange {
                                expected: rev,
                                value: Some(&entry.value),
                            },
                        )
                        .await?
                    {
                        rev = Some(r);
                    }
                }
            }
        }
        Ok(OverlayStore {
            base,
            log: Arc::new(ChangeLog::new()?),
            meta,
        })
    }

    /// Calls `visit` with every entity the run changed, in key order.
    ///
    /// # Errors
    /// The change log cannot be read.
    pub fn for_each_change(&self, mut visit: impl FnMut(Key, Change)) -> Result<()> {
        self.log.for_each(|key, record| {
            visit(
                key,
                Change {
                    before: record.original,
                    after: record.current,
                },
            );
        })
    }
}

#[async_trait]
impl Store for OverlayStore {
    fn info(&self) -> StoreInfo {
        let base = self.base.info();
        StoreInfo {
            scheme: base.scheme,
            location: format!("{} (dry run)", base.location),
        }
    }

    /// The base's scan order and clock; kind renames and atomic writes where
    /// the base has them, run on the overlay; no pushdown and no batch with
    /// its checkpoint in one step (the engine writes on the client, then the
    /// checkpoint), nothing else.
    fn features(&self) -> Features<'_> {
        let base = self.base.features();
        Features {
            scan_ordered: base.scan_ordered,
            server_clock: base.server_clock,
            kind_rename: base.kind_rename.map(|_| self as &dyn KindRename),
            atomic_writes: base.atomic_writes.map(|_| self as &dyn AtomicWrites),
            atomic_writes_hint: base.atomic_writes_hint,
            lazy_in_server: base.lazy_in_server,
            ..Features::default()
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let mut kinds = self.base.kinds().await?;
        for kind in self.log.created_kinds()? {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds.sort();
        Ok(kinds)
    }

    /// The base's entities as the run left them, then the entities the run created.
    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        let filter = request.filter.clone();
        let invalid = |c: &Cursor| {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("cursor {:?} is not one the dry run made", c.0),
            )
        };
        let base_cursor = match &request.cursor {
            None => Some(None),
            Some(c) => match c.0.strip_prefix(BASE_CURSOR) {
                Some(rest) => Some(Some(Cursor(rest.to_owned()))),
                None if c.0.starts_with(CREATED_CURSOR) => None,
                None => return Err(invalid(c)),
            },
        };
        if let Some(cursor) = base_cursor {
            // Scan the base without the filter, then apply the overlay and filter.
            let page = self
                .base
                .scan(kind, ScanRequest::all(cursor, request.limit))
                .await?;
            // The page's entities as the run left them: one read of the change log per page.
            let keys: Vec<Key> = page.entities.iter().map(|e| e.key.clone()).collect();
            let records = self.log.get_many(&keys)?;
            let entities = page
                .entities
                .into_iter()
                .zip(records)
                .filter_map(|(base, record)| match record {
                    Some(record) => record.current,
                    None => Some(base),
                })
                .filter(|e| filter.matches(e))
                .collect();
            let cursor = match page.cursor {
                Some(c) => Some(Cursor(format!("{BASE_CURSOR}{}", c.0))),
                None if self.log.created(kind, None, 0)?.1 => {
                    Some(Cursor(CREATED_CURSOR.to_owned()))
                }
                None => None,
            };
            return Ok(ScanPage { entities, cursor });
        }
        let after = match &request.cursor {
            Some(c) if c.0.len() > CREATED_CURSOR.len() => Some(
                hex::decode(&c.0[CREATED_CURSOR.len()..]).map_err(|e| invalid(c).with_source(e))?,
            ),
            _ => None,
        };
        let (created, more) = self
            .log
            .created(kind, after.as_deref(), request.limit.max(1))?;
        let cursor = match (more, created.last()) {
            (true, Some((k, _))) => Some(Cursor(format!("{CREATED_CURSOR}{}", hex::encode(k)))),
            _ => None,
        };
        Ok(ScanPage {
            entities: created
                .into_iter()
                .map(|(_, e)| e)
                .filter(|e| filter.matches(e))
                .collect(),
            cursor,
        })
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        if let Some(record) = self.log.get(key)? {
            return Ok(record.current);
        }
        self.base.get(key).await
    }

    /// Reads the batch's keys (from the log, else the real store), applies the
    /// writes in order on those states, then logs every key a write applied to.
    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        let mut states = self.states(writes.iter().map(Write::key)).await?;
        let (out, applied) = apply(&mut states, writes);
        self.log_applied(states, &applied)?;
        Ok(out)
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        self.meta.meta_get(name).await
    }

    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        self.meta.meta_cas(name, change).await
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        self.meta.meta_list(prefix).await
    }
}

#[async_trait]
impl KindRename for OverlayStore {
    /// The base checks the request (support, layouts: `limit: 0` writes
    /// nothing); the batches run on the overlay: each entity is inserted under
    /// the new kind, unless that key is taken, and deleted under the old one.
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        if request.limit == 0 || request.from == request.to {
            let Some(base) = self.base.features().kind_rename else {
                return Err(Error::unsupported(self.base.info().scheme, "rename_kind"));
            };
            return base
                .rename_kind(RenameKindRequest {
                    limit: 0,
                    ..request
                })
                .await;
        }
        let page = self
            .scan(
                &request.from,
                ScanRequest::all(request.cursor, request.limit),
            )
            .await?;
        let mut out = RenameKindPage {
            cursor: page.cursor,
            ..RenameKindPage::default()
        };
        for entity in page.entities {
            let mut moved = entity.clone();
            moved.key = Key {
                kind: request.to.clone(),
                id: entity.key.id.clone(),
            };
            let inserted = self.write_batch(vec![Write::Insert(moved)]).await?;
            if inserted.first() == Some(&WriteOutcome::Applied) {
                self.write_batch(vec![Write::Delete(entity.key)]).await?;
                out.renamed += 1;
            } else {
                out.collisions.push(entity.key);
            }
        }
        Ok(out)
    }
}

/// All together or nothing, on the overlay: the keys' states are read once,
/// the guards checked and the writes applied on them, and the change log
/// takes every applied write in one step, or none when a guard or a write
/// fails (what the base's atomic write would do to the real store).
#[async_trait]
impl AtomicWrites for OverlayStore {
    fn scope(&self) -> AtomicScope {
        self.base
            .features()
            .atomic_scope()
            .unwrap_or(AtomicScope::OneId)
    }

    async fn write_atomic(&self, guards: Vec<Guard>, writes: Vec<Write>) -> Result<WriteOutcome> {
        let keys = guards
            .iter()
            .map(Guard::key)
            .chain(writes.iter().map(Write::key));
        let mut states = self.states(keys).await?;
        let holds = guards.iter().all(|g| {
            let current = states.get(g.key()).and_then(|r| r.current.as_ref());
            match g {
                Guard::Absent(_) => current.is_none(),
                Guard::Unchanged(e) => current == Some(e),
            }
        });
        if !holds {
            return Ok(WriteOutcome::Conflict);
        }
        let (out, applied) = apply(&mut states, writes);
        if out.contains(&WriteOutcome::Conflict) {
            return Ok(WriteOutcome::Conflict);
        }
        self.log_applied(states, &applied)?;
        Ok(WriteOutcome::Applied)
    }
}

impl OverlayStore {
    /// The state of each of `keys` as the run left it: from the change log,
    /// else as the real store holds it.
    async fn states<'k>(
        &self,
        keys: impl Iterator<Item = &'k Key>,
    ) -> Result<HashMap<Key, Record>> {
        let mut distinct: Vec<Key> = Vec::new();
        let mut seen: HashSet<&Key> = HashSet::new();
        for key in keys {
            if seen.insert(key) {
                distinct.push(key.clone());
            }
        }
        let logged = self.log.get_many(&distinct)?;
        let mut states: HashMap<Key, Record> = HashMap::with_capacity(distinct.len());
        for (key, record) in distinct.into_iter().zip(logged) {
            let record = match record {
                Some(record) => record,
                None => {
                    let e = self.base.get(&key).await?;
                    Record {
                        original: e.clone(),
                        current: e,
                    }
                }
            };
            states.insert(key, record);
        }
        Ok(states)
    }

    /// Logs the states of the keys in `applied`.
    fn log_applied(&self, states: HashMap<Key, Record>, applied: &HashSet<Key>) -> Result<()> {
        let records: Vec<(Key, Record)> = states
            .into_iter()
            .filter(|(k, _)| applied.contains(k))
            .collect();
        self.log.put_all(&records)
    }
}

/// Applies `writes` in order on `states` (which hold every key they name):
/// one outcome each, and the keys a write applied to.
fn apply(
    states: &mut HashMap<Key, Record>,
    writes: Vec<Write>,
) -> (Vec<WriteOutcome>, HashSet<Key>) {
    let mut applied: HashSet<Key> = HashSet::new();
    let mut out = Vec::with_capacity(writes.len());
    for w in writes {
        let key = w.key().clone();
        let Some(state) = states.get_mut(&key) else {
            continue;
        };
        let (outcome, next) = match w {
            Write::Put(e) => (WriteOutcome::Applied, Some(e)),
            Write::Insert(e) => {
                if state.current.is_some() {
                    (WriteOutcome::Conflict, None)
                } else {
                    (WriteOutcome::Applied, Some(e))
                }
            }
            Write::Replace { expected, new } => {
                if state.current.as_ref() == Some(&expected) {
                    (WriteOutcome::Applied, Some(new))
                } else {
                    (WriteOutcome::Conflict, None)
                }
            }
            Write::Delete(_) => (WriteOutcome::Applied, None),
        };
        if outcome == WriteOutcome::Applied {
            state.current = next;
            applied.insert(key);
        }
        out.push(outcome);
    }
    (out, applied)
}
