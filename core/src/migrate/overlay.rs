//! The dry-run store: reads through to a real store, keeps every write in memory.
//!
//! `tern plan` and `tern up --dry-run` run the real engine over an
//! [`OverlayStore`], so what they report is exactly what `tern up` would do,
//! computed by the same code, and nothing reaches the real store. Memory grows
//! with the number of entities the migration changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::model::keycode::encode_key;
use crate::model::{Entity, Key};
use crate::store::memory::MemoryStore;
use crate::store::{
    Capability, Cursor, Error, ErrorKind, MetaCas, MetaEntry, RenameKindPage, RenameKindRequest,
    Result, ScanPage, ScanRequest, Store, StoreInfo, Write, WriteOutcome,
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

#[derive(Debug, Default)]
struct Overlay {
    /// Key → current overlay state (`None` = deleted), with the original.
    entities: HashMap<Key, (Option<Entity>, Option<Entity>)>,
}

/// A store that reads from `base` and keeps all writes (entities and metadata) in memory.
#[derive(Debug, Clone)]
pub struct OverlayStore {
    base: Arc<dyn Store>,
    overlay: Arc<Mutex<Overlay>>,
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
                    if let MetaCas::Applied(r) =
                        meta.meta_cas(&name, rev, Some(&entry.value)).await?
                    {
                        rev = Some(r);
                    }
                }
            }
        }
        Ok(OverlayStore {
            base,
            overlay: Arc::new(Mutex::new(Overlay::default())),
            meta,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Overlay> {
        self.overlay
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every entity the run changed, sorted by key.
    pub fn changes(&self) -> BTreeMap<Key, Change> {
        self.lock()
            .entities
            .iter()
            .map(|(k, (before, after))| {
                (
                    k.clone(),
                    Change {
                        before: before.clone(),
                        after: after.clone(),
                    },
                )
            })
            .collect()
    }

    /// The entities of `kind` the run created (absent from the base when first
    /// read), after the encoded key `after`, in key order, at most `limit`;
    /// and whether more follow.
    fn created(
        &self,
        kind: &str,
        after: Option<&[u8]>,
        limit: usize,
    ) -> (Vec<(Vec<u8>, Entity)>, bool) {
        let mut created: Vec<(Vec<u8>, Entity)> = self
            .lock()
            .entities
            .iter()
            .filter(|(k, (before, _))| k.kind == kind && before.is_none())
            .filter_map(|(k, (_, after))| after.clone().map(|e| (encode_key(k), e)))
            .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .collect();
        created.sort_by(|a, b| a.0.cmp(&b.0));
        let more = created.len() > limit;
        created.truncate(limit);
        (created, more)
    }

    fn current(&self, key: &Key, base: Option<Entity>) -> Option<Entity> {
        match self.lock().entities.get(key) {
            Some((_, after)) => after.clone(),
            None => base,
        }
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

    fn capability(&self) -> Capability {
        Capability {
            update_pushdown: false,
            server_clock: self.base.capability().server_clock,
            ..self.base.capability()
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let mut kinds = self.base.kinds().await?;
        for (key, (before, after)) in self.lock().entities.iter() {
            if before.is_none() && after.is_some() && !kinds.contains(&key.kind) {
                kinds.push(key.kind.clone());
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
                .scan(
                    kind,
                    ScanRequest {
                        filter: crate::store::Filter::all(),
                        cursor,
                        limit: request.limit,
                    },
                )
                .await?;
            let entities = page
                .entities
                .into_iter()
                .filter_map(|e| {
                    let key = e.key.clone();
                    self.current(&key, Some(e))
                })
                .filter(|e| filter.matches(e))
                .collect();
            let cursor = match page.cursor {
                Some(c) => Some(Cursor(format!("{BASE_CURSOR}{}", c.0))),
                None if self.created(kind, None, 0).1 => Some(Cursor(CREATED_CURSOR.to_owned())),
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
        let (created, more) = self.created(kind, after.as_deref(), request.limit.max(1));
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
        if let Some((_, after)) = self.lock().entities.get(key) {
            return Ok(after.clone());
        }
        self.base.get(key).await
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        crate::store::check_writes(&writes)?;
        let mut out = Vec::with_capacity(writes.len());
        for w in writes {
            let key = match &w {
                Write::Put(e) | Write::Insert(e) => e.key.clone(),
                Write::Replace { expected, .. } => expected.key.clone(),
                Write::Delete(k) => k.clone(),
            };
            let known = self.lock().entities.get(&key).cloned();
            let (original, current) = match known {
                Some((original, current)) => (original, current),
                None => {
                    let e = self.base.get(&key).await?;
                    (e.clone(), e)
                }
            };
            let (outcome, next) = match w {
                Write::Put(e) => (WriteOutcome::Applied, Some(e)),
                Write::Insert(e) => {
                    if current.is_some() {
                        (WriteOutcome::Conflict, current)
                    } else {
                        (WriteOutcome::Applied, Some(e))
                    }
                }
                Write::Replace { expected, new } => {
                    if current.as_ref() == Some(&expected) {
                        (WriteOutcome::Applied, Some(new))
                    } else {
                        (WriteOutcome::Conflict, current)
                    }
                }
                Write::Delete(_) => (WriteOutcome::Applied, None),
            };
            if outcome == WriteOutcome::Applied {
                self.lock().entities.insert(key, (original, next));
            }
            out.push(outcome);
        }
        Ok(out)
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        self.meta.meta_get(name).await
    }

    async fn meta_cas(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<MetaCas> {
        self.meta.meta_cas(name, expected, value).await
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        self.meta.meta_list(prefix).await
    }

    async fn now(&self) -> Result<i64> {
        self.base.now().await
    }

    /// The base checks the request (support, layouts: `limit: 0` writes
    /// nothing); the batches run on the overlay: each entity is inserted under
    /// the new kind, unless that key is taken, and deleted under the old one.
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        if request.limit == 0 || request.from == request.to {
            return self
                .base
                .rename_kind(RenameKindRequest {
                    limit: 0,
                    ..request
                })
                .await;
        }
        let page = self
            .scan(
                &request.from,
                ScanRequest {
                    filter: crate::store::Filter::all(),
                    cursor: request.cursor,
                    limit: request.limit,
                },
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
