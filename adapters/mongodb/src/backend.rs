//! [`MongoStore`]: the [`Store`] implementation.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Database};
use tern_core::model::{Entity, Key, Value, Version};
use tern_core::store::{
    Capability, Cursor, Error, ErrorKind, Filter, MetaCas, MetaEntry, PushdownPage,
    PushdownRequest, RenameKindPage, RenameKindRequest, Result, ScanPage, ScanRequest, Store,
    StoreInfo, Write, WriteOutcome, url,
};

use crate::codec::{self, VERSION_FIELD};
use crate::core::{
    and, id_batch, is_duplicate_key, map_connect_error, map_mongo_error, version_query,
};

/// The collection of tern's metadata; never listed as a kind.
pub(crate) const META_COLLECTION: &str = "__tern_meta";

/// A MongoDB database as a tern store. Cheap to clone (the driver's client is shared).
#[derive(Clone)]
pub struct MongoStore {
    pub(crate) client: Client,
    /// The server has the `bulkWrite` command (MongoDB 8.0+).
    pub(crate) bulk_write: bool,
    /// Open cursors of scans and pushdown runs, continued batch after batch.
    pub(crate) open_cursors: std::sync::Arc<crate::batches::OpenCursors>,
    /// Kinds whose pushdown fast path counts a batch before updating it.
    pub(crate) counts_first: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    pub(crate) db: Database,
    /// Run by a kind rename between the copy and the delete of a batch (tests).
    #[cfg(feature = "fault-injection")]
    pub(crate) after_copy: Option<crate::rename::AfterCopy>,
    /// The URL with its password masked.
    pub(crate) location: String,
}

impl std::fmt::Debug for MongoStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client's options hold credentials: leave them out.
        f.debug_struct("MongoStore")
            .field("location", &self.location)
            .field("database", &self.db.name())
            .finish_non_exhaustive()
    }
}

impl MongoStore {
    /// Connects to `url` and pings the server.
    ///
    /// # Errors
    /// As [`crate::open`].
    pub async fn connect(url: &str) -> Result<MongoStore> {
        let location = url::redact(url);
        let mut options = ClientOptions::parse(url).await.map_err(|e| {
            map_connect_error("parsing the store URL", e, url).with_context("url", location.clone())
        })?;
        let Some(db_name) = options.default_database.clone().filter(|d| !d.is_empty()) else {
            return Err(Error::new(
                ErrorKind::ConfigInvalid,
                "the mongodb URL names no database: add it as the path, e.g. mongodb://127.0.0.1:27017/mydb",
            )
            .with_context("url", location));
        };
        if options.server_selection_timeout.is_none() {
            options.server_selection_timeout = Some(Duration::from_secs(10));
        }
        if options.connect_timeout.is_none() {
            options.connect_timeout = Some(Duration::from_secs(5));
        }
        let client = Client::with_options(options).map_err(|e| {
            map_connect_error("creating the client", e, url).with_context("url", location.clone())
        })?;
        let db = client.database(&db_name);
        let hello = db.run_command(doc! { "hello": 1 }).await.map_err(|e| {
            map_connect_error("connecting", e, url).with_context("url", location.clone())
        })?;
        let wire = match hello.get("maxWireVersion") {
            Some(Bson::Int32(v)) => *v,
            Some(Bson::Int64(v)) => i32::try_from(*v).unwrap_or(i32::MAX),
            _ => 0,
        };
        let bulk_write = wire >= crate::writes::BULK_WRITE_WIRE_VERSION;
        if !bulk_write {
            tracing::info!(
                store = %location,
                wire_version = wire,
                "the server has no bulkWrite command (MongoDB 8.0+): writes go one at a time"
            );
        }
        Ok(MongoStore {
            client,
            db,
            bulk_write,
            open_cursors: Default::default(),
            counts_first: Default::default(),
            #[cfg(feature = "fault-injection")]
            after_copy: None,
            location,
        })
    }

    /// This store, sending each write of a batch on its own (as it does with servers
    /// older than MongoDB 8.0, which have no `bulkWrite` command) instead of one
    /// `bulkWrite` per batch. For comparisons and tests; outcomes are the same.
    #[must_use]
    pub fn with_single_writes(mut self) -> MongoStore {
        self.bulk_write = false;
        self
    }

    /// This store, running `hook` in every [`Store::rename_kind`] batch after the
    /// documents are copied to the new kind and before the old ones are deleted,
    /// with the keys (of the old kind) just copied. For tests of what a writer
    /// that acts in between does to a rename; not for production use (feature
    /// `fault-injection`).
    #[cfg(feature = "fault-injection")]
    #[must_use]
    pub fn with_after_copy_hook(
        mut self,
        hook: impl Fn(Vec<Key>) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> MongoStore {
        self.after_copy = Some(std::sync::Arc::new(hook));
        self
    }

    /// The collection of `kind`.
    pub(crate) fn collection(&self, kind: &str) -> Collection<Document> {
        self.db.collection(kind)
    }

    fn meta(&self) -> Collection<Document> {
        self.db.collection(META_COLLECTION)
    }

    pub(crate) fn err(&self, operation: &str, e: mongodb::error::Error) -> Error {
        map_mongo_error(operation, e).with_context("store", self.location.clone())
    }

    /// The scan query of `filter`: exact for the version, a superset for
    /// conditions (the caller post-filters with [`Filter::matches`]).
    fn scan_query(&self, filter: &Filter) -> Document {
        let mut parts = Vec::new();
        if let Some(v) = version_query(filter.version) {
            parts.push(v);
        }
        for c in &filter.conditions {
            if let Some(q) = superset_condition(&c.path, &c.values) {
                parts.push(q);
            }
        }
        and(parts)
    }

    async fn get_doc(&self, kind: &str, id: &Bson) -> Result<Option<Document>> {
        self.collection(kind)
            .find_one(doc! { "_id": id.clone() })
            .await
            .map_err(|e| self.err("get", e).with_context("kind", kind.to_owned()))
    }
}

/// Decodes a scan or pushdown cursor: the canonical extended JSON of `{"_id": last}`.
pub(crate) fn decode_cursor(cursor: &Cursor) -> Result<Bson> {
    let invalid = || {
        Error::new(
            ErrorKind::InvalidCursor,
            format!("cursor {:?} is not one the mongodb store made", cursor.0),
        )
    };
    let json: serde_json::Value =
        serde_json::from_str(&cursor.0).map_err(|e| invalid().with_source(e))?;
    match Bson::try_from(json) {
        Ok(Bson::Document(mut d)) => d.remove("_id").ok_or_else(invalid),
        _ => Err(invalid()),
    }
}

/// Encodes `last` as a cursor.
pub(crate) fn encode_cursor(last: &Bson) -> Cursor {
    let d = doc! { "_id": last.clone() };
    Cursor(Bson::Document(d).into_canonical_extjson().to_string())
}

/// A query matching at least the documents whose `path` satisfies the atom (a
/// superset: MongoDB also matches missing fields for `null` and traverses arrays
/// along a path). `None` when no useful superset is cheap to express.
fn superset_condition(path: &[String], values: &[Value]) -> Option<Document> {
    if path.is_empty() || values.is_empty() {
        return None;
    }
    // Documents and arrays compare by field order in MongoDB: not a safe superset.
    if values
        .iter()
        .any(|v| matches!(v, Value::Map(_) | Value::Array(_)))
    {
        return None;
    }
    let field = path
        .iter()
        .map(|p| codec::escape_name(p))
        .collect::<Vec<_>>()
        .join(".");
    let literals: Vec<Bson> = values.iter().map(codec::to_bson).collect();
    Some(doc! { field: { "$in": literals } })
}

fn meta_entry(d: &Document) -> Result<MetaEntry> {
    let bad = || Error::new(ErrorKind::InvalidData, "a malformed tern metadata document");
    let revision = match d.get("revision") {
        Some(Bson::Int64(r)) => u64::try_from(*r).map_err(|_| bad())?,
        Some(Bson::Int32(r)) => u64::try_from(*r).map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    let value = d.get_str("value").map_err(|_| bad())?.to_owned();
    Ok(MetaEntry { value, revision })
}

#[async_trait]
impl Store for MongoStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: crate::MONGO_SCHEME,
            location: self.location.clone(),
        }
    }

    fn capability(&self) -> Capability {
        Capability {
            // Scans follow MongoDB's _id order (BSON type order first), not tern's value order,
            // so they are not "ordered" in the contract's sense; they never repeat an entity.
            scan_ordered: false,
            update_pushdown: true,
            server_clock: true,
            atomic_batch_with_meta: false,
            rename_kind: true,
            atomic_writes: false,
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
            let one = self
                .collection(&name)
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
        let limit = request.limit.clamp(1, 100_000);
        let query = self.scan_query(&request.filter);
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
        let mut docs: Vec<Document> = self
            .collection(kind)
            .find(and(vec![query, id_batch(&ids)]))
            .sort(doc! { "_id": 1 })
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
            .await
            .map_err(|e| self.err("scan", e).with_context("kind", kind.to_owned()))?
            .try_collect()
            .await
            .map_err(|e| self.err("scan", e).with_context("kind", kind.to_owned()))?;
        let cursor = crate::batches::page_cursor(&mut docs, &ids, limit);
        let mut entities = Vec::with_capacity(docs.len());
        for d in &docs {
            let e = codec::document_to_entity(kind, d)
                .map_err(|e| e.with_context("kind", kind.to_owned()))?;
            if request.filter.matches(&e) {
                entities.push(e);
            }
        }
        Ok(ScanPage { entities, cursor })
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
        let d = self
            .meta()
            .find_one(doc! { "_id": name })
            .await
            .map_err(|e| {
                self.err("reading metadata", e)
                    .with_context("name", name.to_owned())
            })?;
        d.as_ref().map(meta_entry).transpose()
    }

    async fn meta_cas(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<MetaCas> {
        let started = std::time::Instant::now();
        let out = self.meta_cas_inner(name, expected, value).await;
        tracing::debug!(name, ms = started.elapsed().as_secs_f64() * 1e3, "meta_cas");
        out
    }

    async fn meta_list(&self, prefix: &str) -> Result<Vec<String>> {
        self.meta_list_inner(prefix).await
    }

    async fn now(&self) -> Result<i64> {
        self.now_inner().await
    }

    async fn update_in_place(&self, request: PushdownRequest) -> Result<PushdownPage> {
        let started = std::time::Instant::now();
        let out = self.pushdown(request).await;
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            "update_in_place"
        );
        out
    }

    async fn rename_kind(&self, request: RenameKindRequest) -> Result<RenameKindPage> {
        let started = std::time::Instant::now();
        let out = self.rename_kind_inner(request).await;
        tracing::debug!(ms = started.elapsed().as_secs_f64() * 1e3, "rename_kind");
        out
    }

    async fn count(&self, kind: &str, filter: Filter) -> Result<u64> {
        let started = std::time::Instant::now();
        let out = self.count_inner(kind, filter).await;
        tracing::debug!(kind, ms = started.elapsed().as_secs_f64() * 1e3, "count");
        out
    }

    /// The collection's metadata count (`estimatedDocumentCount`): no document is read.
    async fn estimate_count(&self, kind: &str) -> Result<Option<u64>> {
        self.collection(kind)
            .estimated_document_count()
            .await
            .map(Some)
            .map_err(|e| {
                self.err("estimating a count", e)
                    .with_context("kind", kind.to_owned())
            })
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

impl MongoStore {
    async fn meta_cas_inner(
        &self,
        name: &str,
        expected: Option<u64>,
        value: Option<&str>,
    ) -> Result<MetaCas> {
        let ctx = |e: Error| e.with_context("name", name.to_owned());
        let applied = match (expected, value) {
            (None, Some(v)) => {
                match self
                    .meta()
                    .insert_one(doc! { "_id": name, "revision": 1_i64, "value": v })
                    .await
                {
                    Ok(_) => return Ok(MetaCas::Applied(1)),
                    Err(e) if is_duplicate_key(&e) => false,
                    Err(e) => return Err(ctx(self.err("writing metadata", e))),
                }
            }
            (Some(r), Some(v)) => {
                let r = i64::try_from(r).map_err(|_| {
                    ctx(Error::new(
                        ErrorKind::Unexpected,
                        "metadata revision overflow",
                    ))
                })?;
                let res = self
                    .meta()
                    .update_one(
                        doc! { "_id": name, "revision": r },
                        doc! { "$set": { "revision": r + 1, "value": v } },
                    )
                    .await
                    .map_err(|e| ctx(self.err("writing metadata", e)))?;
                if res.matched_count == 1 {
                    return Ok(MetaCas::Applied(u64::try_from(r + 1).unwrap_or(0)));
                }
                false
            }
            (Some(r), None) => {
                let r = i64::try_from(r).unwrap_or(i64::MAX);
                let res = self
                    .meta()
                    .delete_one(doc! { "_id": name, "revision": r })
                    .await
                    .map_err(|e| ctx(self.err("deleting metadata", e)))?;
                res.deleted_count == 1
            }
            (None, None) => self.meta_get(name).await?.is_none(),
        };
        if applied {
            Ok(MetaCas::Applied(0))
        } else {
            Ok(MetaCas::Conflict(self.meta_get(name).await?))
        }
    }

    async fn meta_list_inner(&self, prefix: &str) -> Result<Vec<String>> {
        let docs: Vec<Document> = self
            .meta()
            .find(doc! { "_id": { "$gte": prefix } })
            .projection(doc! { "_id": 1 })
            .sort(doc! { "_id": 1 })
            .await
            .map_err(|e| self.err("listing metadata", e))?
            .try_collect()
            .await
            .map_err(|e| self.err("listing metadata", e))?;
        let mut names: Vec<String> = docs
            .iter()
            .filter_map(|d| d.get_str("_id").ok())
            .filter(|n| n.starts_with(prefix))
            .map(str::to_owned)
            .collect();
        names.sort();
        Ok(names)
    }

    async fn now_inner(&self) -> Result<i64> {
        let reply = self
            .db
            .run_command(doc! { "hello": 1 })
            .await
            .map_err(|e| self.err("reading the server clock", e))?;
        match reply.get("localTime") {
            Some(Bson::DateTime(t)) => Ok(t.timestamp_millis()),
            _ => Err(Error::new(
                ErrorKind::InvalidData,
                "the server's hello reply has no localTime",
            )
            .with_context("store", self.location.clone())),
        }
    }

    async fn count_inner(&self, kind: &str, filter: Filter) -> Result<u64> {
        if !filter.conditions.is_empty() {
            return tern_core::store::count_by_scan(self, kind, filter).await;
        }
        let q = version_query(filter.version).unwrap_or_default();
        self.collection(kind)
            .count_documents(q)
            .await
            .map_err(|e| self.err("count", e).with_context("kind", kind.to_owned()))
    }

    async fn version_census_inner(&self, kind: &str) -> Result<BTreeMap<Version, u64>> {
        let docs: Vec<Document> = self
            .collection(kind)
            .aggregate(vec![
                doc! { "$group": { "_id": "$_v", "n": { "$sum": 1_i64 } } },
            ])
            .await
            .map_err(|e| self.err("census", e).with_context("kind", kind.to_owned()))?
            .try_collect()
            .await
            .map_err(|e| self.err("census", e).with_context("kind", kind.to_owned()))?;
        let mut census = BTreeMap::new();
        for d in docs {
            let mut probe = Document::new();
            if let Some(v) = d.get("_id") {
                probe.insert(VERSION_FIELD, v.clone());
            }
            let v =
                codec::version_of(&probe).map_err(|e| e.with_context("kind", kind.to_owned()))?;
            let n = crate::core::group_count(d.get("n"), "census")
                .map_err(|e| e.with_context("kind", kind.to_owned()))?;
            *census.entry(v).or_insert(0) += n;
        }
        Ok(census)
    }
}
