//! The dry-run store: reads through to a real store, keeps every write in memory.
//!
//! `tern plan` and `tern up --dry-run` run the real engine over an
//! [`OverlayStore`], so what they report is exactly what `tern up` would do,
//! computed by the same code, and nothing reaches the real store. Memory grows
//! with the number of entities the migration changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use crate::model::{Entity, Key};
use crate::store::memory::MemoryStore;
use crate::store::{
    Capability, MetaCas, MetaEntry, Result, ScanPage, ScanRequest, Store, StoreInfo, Write,
    WriteOutcome,
};

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
        self.base.kinds().await
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        // Scan the base without the filter, then apply the overlay and filter.
        let filter = request.filter.clone();
        let page = self
            .base
            .scan(
                kind,
                ScanRequest {
                    filter: crate::store::Filter::all(),
                    cursor: request.cursor,
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
        Ok(ScanPage {
            entities,
            cursor: page.cursor,
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
}
