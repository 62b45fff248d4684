//! [`MongoStore`]: the [`Store`] implementation (the driver calls live in `core`
//! and the feature files).

use std::collections::BTreeMap;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{Document, RawDocumentBuf, doc};
use tern_core::model::{Entity, Key, Version};
use tern_core::store::{
    CountEstimate, Features, Filter, KindRename, MetaCas, MetaChange, MetaEntry, ProjectedScan,
    Pushdown, PushdownPage, PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage,
    ScanRequest, ServerClock, Store, StoreInfo, Write, WriteOutcome,
};

use crate::codec;
use crate::config::MONGO_SCHEME;
use crate::core::{META_COLLECTION, MongoStore, and, id_batch};

/// The entities of `docs` (of `kind`) that pass `filter` (the server's query
/// is a superset of it).
fn matching(kind: &str, docs: &[Document], filter: &Filter) -> Result<Vec<Entity>> {
    let mut entities = Vec::with_capacity(docs.len());
    for d in docs {
        let e = codec::document_to_entity(kind, d)
            .map_err(|e| e.with_context("kind", kind.to_owned()))?;
        if filter.matches(&e) {
            entities.push(e);
        }
    }
    Ok(entities)
}

#[async_trait]
impl Store for MongoStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: MONGO_SCHEME,
            location: self.location.clone(),
        }
    }

    /// Scans follow MongoDB's `_id` order (BSON type order first), not tern's
    /// value order, so they are not "ordered" in the contract's sense; they
    /// never repeat an entity. Atomic writes (lazy kind renames) by
    /// multi-document transactions where the deployment has them (a replica
    /// set or a sharded cluster), else absent with the reason; a batch and its
    /// checkpoint are two calls.
    fn features(&self) -> Features<'_> {
        Features {
            atomic_writes: self
                .transactions
                .then_some(self as &dyn tern_core::store::AtomicWrites),
            atomic_writes_hint: (!self.transactions).then_some(crate::atomic::NO_TRANSACTIONS),
            pushdown: Some(self),
            kind_rename: Some(self),
            projected_scan: Some(self),
            server_clock: Some(self),
            count_estimate: Some(self),
            partitions: Some(self),
            ..Features::default()
        }
    }

    async fn kinds(&self) -> Result<Vec<String>> {
        let names = self
            .db
            .list_collection_names()
            .await
            .map_err(|e| self.err("listing collections", e))?;
        let mut kinds = Vec::new();
        for name in names {
            if name == META_COLLECTION || name.starts_with("system.") {
                continue;
            }
            // Raw: a document is not decoded here (see `codec::from_raw`).
            let one = self
                .raw_collection(&name)
                .find_one(Document::new())
                .await
                .map_err(|e| self.err("listing kinds", e))?;
            if one.is_some() {
                kinds.push(name);
            }
        }
        kinds.sort();
        Ok(kinds)
    }

    async fn scan(&self, kind: &str, request: ScanRequest) -> Result<ScanPage> {
        self.scan_in(kind, request, None).await
    }

    async fn get(&self, key: &Key) -> Result<Option<Entity>> {
        match self.get_doc(&key.kind, &codec::id_to_bson(&key.id)).await? {
            Some(d) => codec::document_to_entity(&key.kind, &d)
                .map(Some)
                .map_err(|e| e.with_context("key", key.to_string())),
            None => Ok(None),
        }
    }

    async fn write_batch(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        self.write_all(writes).await
    }

    async fn meta_get(&self, name: &str) -> Result<Option<MetaEntry>> {
        self.meta_get_inner(name).await
    }

    async fn meta_cas(&self, name: &str, change: MetaChange<'_>) -> Result<MetaCas> {
        let started = std::time::Instant::now();
        let out = self.meta_cas_inner(name, change).await;
        tracing::debug!(name, ms = started.elapsed().as_secs_f64() * 1e3, "meta_cas");
        out
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        self.meta_list_inner(prefix).await
    }

    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        let started = std::time::Instant::now();
        let out = self.count_inner(kind, filter).await;
        tracing::debug!(kind, ms = started.elapsed().as_secs_f64() * 1e3, "count");
        out
    }

    async fn version_census(&self, kind: &str) -> Result<BTreeMap<Version, u64>> {
        let started = std::time::Instant::now();
        let out = self.version_census_inner(kind).await;
        tracing::debug!(
            kind,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "version_census"
        );
        out
    }
}

#[async_trait]
impl ProjectedScan for MongoStore {
    /// A pass that writes nothing reads its documents straight from one
    /// server cursor kept open from page to page, only the fields it needs
    /// (`properties`, those the filter tests, the version), where
    /// [`Store::scan`] reads the page's ids from the cursor and then the
    /// documents as they are now by `_id` range: a server whose range read
    /// grows with the collection (SecantusDB) then pays it once a pass, not
    /// once a page. The documents are as the cursor found them (SecantusDB's
    /// holds the matches from the moment it opened), which a pass that
    /// writes nothing may use.
    async fn scan_projected(
        &self,
        kind: &str,
        request: ScanRequest,
        properties: &[String],
    ) -> Result<ScanPage> {
        let limit = request.limit.clamp(1, 100_000);
        let query = self.scan_query(&request.filter);
        let mut projection = doc! { "_id": 1, codec::VERSION_FIELD: 1 };
        let tested = request
            .filter
            .conditions
            .iter()
            .filter_map(|c| c.path.first());
        let mut names = properties.iter().chain(tested);
        // A dotted or `$` name is no projection path (`a.b` projects the
        // nested `b`): then the whole documents.
        let projection = if names.clone().any(|n| codec::has_two_forms(n)) {
            None
        } else {
            for name in &mut names {
                projection.insert(codec::escape_name(name), 1);
            }
            Some(projection)
        };
        let docs = self
            .batch_docs(
                kind,
                query,
                projection,
                request.cursor.as_ref(),
                limit,
                "scan: reading a page for a pass that writes nothing",
            )
            .await?;
        let cursor = crate::batches::last_of_full(&docs, limit).map(crate::core::encode_cursor);
        let entities = matching(kind, &docs, &request.filter)?;
        Ok(ScanPage { entities, cursor })
    }
}

#[async_trait]
impl ServerClock for MongoStore {
    async fn now(&self) -> Result<i64> {
        self.now_inner().await
    }
}

#[async_trait]
impl Pushdown for MongoStore {
    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        let started = std::time::Instant::now();
        let out = self.pushdown(request).await;
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            "update_in_place"
        );
        out
    }
}

#[async_trait]
impl KindRename for MongoStore {
    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        let started = std::time::Instant::now();
        let out = self.rename_kind_inner(request).await;
        tracing::debug!(ms = started.elapsed().as_secs_f64() * 1e3, "rename_kind");
        out
    }
}

#[async_trait]
impl CountEstimate for MongoStore {
    /// The collection's metadata count (`estimatedDocumentCount`): no document is read.
    async fn estimate_count(&self, kind: &str) -> Result<u64> {
        self.collection(kind)
            .estimated_document_count()
            .await
            .map_err(|e| {
                self.err("estimating a count", e)
                    .with_context("kind", kind.to_owned())
            })
    }
}

impl MongoStore {
    /// [`Store::scan`], restricted to the documents `range` matches (an
    /// `_id` range: a partition), where given.
    pub(crate) async fn scan_in(
        &self,
        kind: &str,
        request: ScanRequest,
        range: Option<Document>,
    ) -> Result<ScanPage> {
        let limit = request.limit.clamp(1, 100_000);
        let query = match range {
            Some(r) => and([self.scan_query(&request.filter), r]
                .into_iter()
                .filter(|d| !d.is_empty())
                .collect()),
            None => self.scan_query(&request.filter),
        };
        let ids = self
            .batch_ids(
                kind,
                query.clone(),
                request.cursor.as_ref(),
                limit,
                "scan: reading the page's ids",
            )
            .await?;
        if ids.is_empty() {
            return Ok(ScanPage::default());
        }
        // The page's documents as they are now, by `_id` range (see `batches`).
        let started = std::time::Instant::now();
        let raws: Vec<RawDocumentBuf> = self
            .raw_collection(kind)
            .find(and(vec![query, id_batch(&ids)]))
            .sort(doc! { "_id": 1 })
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
            .await
            .map_err(|e| self.err("scan", e).with_context("kind", kind.to_owned()))?
            .try_collect()
            .await
            .map_err(|e| self.err("scan", e).with_context("kind", kind.to_owned()))?;
        let mut docs = codec::from_raw_all(&raws)?;
        tracing::debug!(
            kind,
            docs = docs.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "scan: the page's documents"
        );
        let cursor = crate::batches::page_cursor(&mut docs, &ids, limit);
        let entities = matching(kind, &docs, &request.filter)?;
        Ok(ScanPage { entities, cursor })
    }
}
