//! The store type, its constructor and the driver calls shared by the store and
//! its feature files: error mapping, filters, cursors, metadata and counts.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, RawDocumentBuf, doc};
use mongodb::error::{ErrorKind as DriverKind, WriteFailure};
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, Database};
use tern_core::model::{Value, Version};
use tern_core::store::{
    Cursor, Error, ErrorKind, Filter, MetaCas, MetaChange, MetaEntry, Result, VersionFilter,
};

use crate::codec::{self, VERSION_FIELD};
use crate::config::MongoConfig;

/// The lowest wire version of a server with the `bulkWrite` command (MongoDB 8.0).
pub(crate) const BULK_WRITE_WIRE_VERSION: i32 = 25;

/// A hook run after a batch is copied to the new kind and before the sources
/// are deleted, with the keys (of the old kind) just copied. For tests.
#[cfg(feature = "fault-injection")]
pub(crate) type AfterCopy = tern_core::store::rename_copy::AfterCopyHook;

/// How many cursors a store keeps open at most (one per concurrent scan or run).
const KEEP: usize = 8;

/// An open cursor: its kind and query, and where it stands.
struct Open {
    kind: String,
    /// The query and projection, as canonical extended JSON.
    query: String,
    /// The cursor text of the last document handed out.
    at: String,
    docs: mongodb::Cursor<RawDocumentBuf>,
}

/// The open cursors of a store (shared by its clones).
#[derive(Default)]
pub(crate) struct OpenCursors {
    open: std::sync::Mutex<Vec<Open>>,
}

impl std::fmt::Debug for OpenCursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenCursors").finish_non_exhaustive()
    }
}

impl OpenCursors {
    pub(crate) fn take(
        &self,
        kind: &str,
        query: &str,
        at: &str,
    ) -> Option<mongodb::Cursor<RawDocumentBuf>> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let i = open
            .iter()
            .position(|o| o.kind == kind && o.query == query && o.at == at)?;
        Some(open.swap_remove(i).docs)
    }

    /// Drops the kept cursors of `kind` and `query`: a request from the
    /// start begins a new pass, and a cursor kept by an earlier pass of the
    /// same query (one that ended early) may hold documents as they were
    /// before changes since.
    pub(crate) fn forget(&self, kind: &str, query: &str) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|o| !(o.kind == kind && o.query == query));
    }

    pub(crate) fn keep(
        &self,
        kind: &str,
        query: String,
        at: String,
        docs: mongodb::Cursor<RawDocumentBuf>,
    ) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() >= KEEP {
            open.remove(0);
        }
        open.push(Open {
            kind: kind.to_owned(),
            query,
            at,
            docs,
        });
    }
}

/// The collection of tern's metadata; never listed as a kind.
pub(crate) const META_COLLECTION: &str = "__tern_meta";

/// A MongoDB database as a tern store. Cheap to clone (the driver's client is shared).
#[derive(Clone)]
pub struct MongoStore {
    pub(crate) client: Client,
    /// The server has the `bulkWrite` command (MongoDB 8.0+).
    pub(crate) bulk_write: bool,
    /// The deployment runs multi-document transactions (a replica set or a
    /// sharded cluster, as its `hello` says): the `atomic_writes` facet.
    pub(crate) transactions: bool,
    /// Open cursors of scans and pushdown runs, continued batch after batch.
    pub(crate) open_cursors: std::sync::Arc<OpenCursors>,
    /// Kinds whose pushdown fast path counts a batch before updating it.
    pub(crate) counts_first: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    pub(crate) db: Database,
    /// Run by a kind rename between the copy and the delete of a batch (tests).
    #[cfg(feature = "fault-injection")]
    pub(crate) after_copy: Option<AfterCopy>,
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
    /// Connects to the server named by `config` and checks that it answers.
    ///
    /// # Errors
    /// [`ErrorKind::Unavailable`] (temporary) when the server does not answer,
    /// [`ErrorKind::ConfigInvalid`] for options the driver refuses. Messages name the
    /// URL with its password masked.
    pub async fn connect(config: MongoConfig) -> Result<MongoStore> {
        let MongoConfig {
            connection,
            url,
            database: db_name,
            redacted: location,
        } = config;
        let mut options = ClientOptions::parse(connection).await.map_err(|e| {
            connect_error("parsing the store URL", e, &url).with_context("url", location.clone())
        })?;
        if options.server_selection_timeout.is_none() {
            options.server_selection_timeout = Some(Duration::from_secs(10));
        }
        if options.connect_timeout.is_none() {
            options.connect_timeout = Some(Duration::from_secs(5));
        }
        let client = Client::with_options(options).map_err(|e| {
            connect_error("creating the client", e, &url).with_context("url", location.clone())
        })?;
        let db = client.database(&db_name);
        let hello = db.run_command(doc! { "hello": 1 }).await.map_err(|e| {
            connect_error("connecting", e, &url).with_context("url", location.clone())
        })?;
        let wire = match hello.get("maxWireVersion") {
            Some(Bson::Int32(v)) => *v,
            Some(Bson::Int64(v)) => i32::try_from(*v).unwrap_or(i32::MAX),
            _ => 0,
        };
        let bulk_write = wire >= BULK_WRITE_WIRE_VERSION;
        let transactions = has_transactions(&hello);
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
            transactions,
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
        hook: impl tern_core::store::rename_copy::AfterCopyFn,
    ) -> MongoStore {
        self.after_copy = Some(std::sync::Arc::new(hook));
        self
    }

    /// The collection of `kind`.
    pub(crate) fn collection(&self, kind: &str) -> Collection<Document> {
        self.db.collection(kind)
    }

    /// The collection of `kind` for reading stored documents as they are
    /// (see [`codec::from_raw`]).
    pub(crate) fn raw_collection(&self, kind: &str) -> Collection<RawDocumentBuf> {
        self.db.collection(kind)
    }

    pub(crate) fn meta(&self) -> Collection<Document> {
        self.db.collection(META_COLLECTION)
    }

    pub(crate) fn err(&self, operation: &str, e: mongodb::error::Error) -> Error {
        driver_error(operation, e).with_context("store", self.location.clone())
    }

    /// The scan query of `filter`: exact for the version, a superset for
    /// conditions (the caller post-filters with [`Filter::matches`]).
    pub(crate) fn scan_query(&self, filter: &Filter) -> Document {
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

    pub(crate) async fn get_doc(&self, kind: &str, id: &Bson) -> Result<Option<Document>> {
        let raw = self
            .raw_collection(kind)
            .find_one(doc! { "_id": id.clone() })
            .await
            .map_err(|e| self.err("get", e).with_context("kind", kind.to_owned()))?;
        raw.map(|r| codec::from_raw(&r)).transpose()
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
    // A dotted or `$` name is no query path (and may be stored in two forms).
    if path.iter().any(|p| codec::has_two_forms(p)) {
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

pub(crate) fn meta_entry(d: &Document) -> Result<MetaEntry> {
    let bad = || Error::new(ErrorKind::InvalidData, "a malformed tern metadata document");
    let revision = match d.get("revision") {
        Some(Bson::Int64(r)) => u64::try_from(*r).map_err(|_| bad())?,
        Some(Bson::Int32(r)) => u64::try_from(*r).map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    let value = d.get_str("value").map_err(|_| bad())?.to_owned();
    Ok(MetaEntry { value, revision })
}

impl MongoStore {
    pub(crate) async fn meta_cas_inner(
        &self,
        name: &str,
        change: MetaChange<'_>,
    ) -> Result<MetaCas> {
        let MetaChange { expected, value } = change;
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
            (None, None) => self.meta_get_inner(name).await?.is_none(),
        };
        if applied {
            Ok(MetaCas::Applied(0))
        } else {
            Ok(MetaCas::Conflict(self.meta_get_inner(name).await?))
        }
    }

    pub(crate) async fn meta_get_inner(&self, name: &str) -> Result<Option<MetaEntry>> {
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

    pub(crate) async fn meta_list_inner(&self, prefix: &str) -> Result<Vec<String>> {
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

    pub(crate) async fn now_inner(&self) -> Result<i64> {
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

    pub(crate) async fn count_inner(&self, kind: &str, filter: Filter) -> Result<u64> {
        if !filter.conditions.is_empty() {
            return tern_core::store::count_by_scan(self, kind, filter).await;
        }
        let q = version_query(filter.version).unwrap_or_default();
        self.collection(kind)
            .count_documents(q)
            .await
            .map_err(|e| self.err("count", e).with_context("kind", kind.to_owned()))
    }

    pub(crate) async fn version_census_inner(&self, kind: &str) -> Result<BTreeMap<Version, u64>> {
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

/// The MongoDB error code of a duplicate key.
pub(crate) const DUPLICATE_KEY: i32 = 11000;

/// Maps a driver error to a store error: `operation` names the step, the
/// driver's text (see [`driver_text`]) is the cause, and connection trouble is
/// temporary.
pub(crate) fn driver_error(operation: &str, e: mongodb::error::Error) -> Error {
    let text = driver_text(&e);
    map_with_text(operation, &e, text)
}

/// [`driver_error`] for the errors of parsing or connecting to `url`: the driver's
/// text with the URL's password masked (a connection string error may quote it).
pub(crate) fn connect_error(operation: &str, e: mongodb::error::Error, url: &str) -> Error {
    let text = tern_core::store::url::scrub(&driver_text(&e), url);
    map_with_text(operation, &e, text)
}

fn map_with_text(operation: &str, e: &mongodb::error::Error, text: String) -> Error {
    let retryable = e.contains_label("RetryableWriteError")
        || e.contains_label("TransientTransactionError")
        || e.contains_label("RetryableError");
    let (kind, temporary) = match e.kind.as_ref() {
        DriverKind::Io(_)
        | DriverKind::ServerSelection { .. }
        | DriverKind::ConnectionPoolCleared { .. }
        | DriverKind::DnsResolve { .. } => (ErrorKind::Unavailable, true),
        DriverKind::Authentication { .. }
        | DriverKind::InvalidArgument { .. }
        | DriverKind::InvalidTlsConfig { .. } => (ErrorKind::ConfigInvalid, false),
        DriverKind::Command(_) | DriverKind::Write(_) | DriverKind::BulkWrite(_) => {
            (ErrorKind::Rejected, retryable)
        }
        DriverKind::BsonDeserialization(_) | DriverKind::InvalidResponse { .. } => {
            (ErrorKind::InvalidData, false)
        }
        _ => (ErrorKind::Unexpected, retryable),
    };
    let err = Error::new(kind, format!("mongodb: {operation} failed")).with_driver_error(text);
    if temporary { err.set_temporary() } else { err }
}

/// What a driver error says: the text of its kind, then that of each earlier
/// error it carries (`a: b`). The driver's own `Display` adds its labels and
/// the `Debug` form of those earlier errors, and its `source` chain repeats
/// them, so neither is used.
pub(crate) fn driver_text(e: &mongodb::error::Error) -> String {
    let mut text = e.kind.to_string();
    let mut next = std::error::Error::source(e);
    while let Some(cause) = next {
        match cause.downcast_ref::<mongodb::error::Error>() {
            Some(m) => text.push_str(&format!(": {}", m.kind)),
            None => text.push_str(&format!(": {cause}")),
        }
        next = cause.source();
    }
    text
}

/// Whether the deployment whose `hello` reply this is runs multi-document
/// transactions: a replica set member (`setName`, MongoDB 4.0+, wire version 7)
/// or a `mongos` (`msg: "isdbgrid"`, 4.2+, wire version 8), with sessions
/// (`logicalSessionTimeoutMinutes`). A standalone server has none.
pub(crate) fn has_transactions(hello: &Document) -> bool {
    let wire = match hello.get("maxWireVersion") {
        Some(Bson::Int32(v)) => i64::from(*v),
        Some(Bson::Int64(v)) => *v,
        _ => 0,
    };
    let sessions = hello.contains_key("logicalSessionTimeoutMinutes");
    let replica_set = hello.contains_key("setName") && wire >= 7;
    let mongos = hello.get_str("msg").is_ok_and(|m| m == "isdbgrid") && wire >= 8;
    sessions && (replica_set || mongos)
}

/// Is this the duplicate-key error (E11000)?
pub(crate) fn is_duplicate_key(e: &mongodb::error::Error) -> bool {
    match e.kind.as_ref() {
        DriverKind::Write(WriteFailure::WriteError(w)) => w.code == DUPLICATE_KEY,
        DriverKind::Command(c) => c.code == DUPLICATE_KEY,
        DriverKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .is_some_and(|ws| ws.iter().any(|w| w.code == DUPLICATE_KEY)),
        _ => false,
    }
}

/// The query for a version filter; exact (a missing or null `_v` is 0).
pub(crate) fn version_query(filter: VersionFilter) -> Option<Document> {
    match filter {
        VersionFilter::Any => None,
        VersionFilter::Exactly(0) => Some(doc! { VERSION_FIELD: { "$in": [Bson::Null, 0_i64] } }),
        VersionFilter::Exactly(v) => {
            Some(doc! { VERSION_FIELD: i64::try_from(v).unwrap_or(i64::MAX) })
        }
        VersionFilter::Below(0) => Some(doc! { "_id": { "$exists": false } }),
        VersionFilter::Below(v) => Some(doc! { "$or": [
            { VERSION_FIELD: { "$lt": i64::try_from(v).unwrap_or(i64::MAX) } },
            { VERSION_FIELD: Bson::Null },
        ] }),
    }
}

/// The BSON type classes in MongoDB's sort order, by `$type` names.
pub(crate) const TYPE_CLASSES: &[&[&str]] = &[
    &["minKey"],
    &["null", "undefined"],
    &["double", "int", "long", "decimal"],
    &["string", "symbol"],
    &["object"],
    &["array"],
    &["binData"],
    &["objectId"],
    &["bool"],
    &["date"],
    &["timestamp"],
    &["regex"],
    &["dbPointer"],
    &["javascript"],
    &["javascriptWithScope"],
    &["maxKey"],
];

pub(crate) fn type_class(b: &Bson) -> usize {
    match b {
        Bson::MinKey => 0,
        Bson::Null | Bson::Undefined => 1,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => 2,
        Bson::String(_) | Bson::Symbol(_) => 3,
        Bson::Document(_) => 4,
        Bson::Array(_) => 5,
        Bson::Binary(_) => 6,
        Bson::ObjectId(_) => 7,
        Bson::Boolean(_) => 8,
        Bson::DateTime(_) => 9,
        Bson::Timestamp(_) => 10,
        Bson::RegularExpression(_) => 11,
        Bson::DbPointer(_) => 12,
        Bson::JavaScriptCode(_) => 13,
        Bson::JavaScriptCodeWithScope(_) => 14,
        Bson::MaxKey => 15,
    }
}

/// `_id` after `last` in MongoDB's `_id` order. `$gt` only compares within
/// one type class, so the ids of every later class are added explicitly.
pub(crate) fn after_id(last: &Bson) -> Document {
    let later: Vec<Bson> = TYPE_CLASSES
        .iter()
        .skip(type_class(last) + 1)
        .flat_map(|c| c.iter().map(|t| Bson::String((*t).to_owned())))
        .collect();
    if later.is_empty() {
        return doc! { "_id": { "$gt": last.clone() } };
    }
    doc! { "$or": [
        { "_id": { "$gt": last.clone() } },
        { "_id": { "$type": later } },
    ] }
}

/// The conjunction of `parts` as one query.
pub(crate) fn and(parts: Vec<Document>) -> Document {
    match parts.len() {
        0 => Document::new(),
        1 => parts.into_iter().next().unwrap_or_default(),
        _ => doc! { "$and": parts },
    }
}

/// The query of exactly the ids `ids` (sorted by `_id`, contiguous in the
/// collection): a range when first and last share a type class (an index range
/// scan), else `$in`.
pub(crate) fn id_batch(ids: &[Bson]) -> Document {
    match (ids.first(), ids.last()) {
        (Some(first), Some(last)) if type_class(first) == type_class(last) => {
            doc! { "_id": { "$gte": first.clone(), "$lte": last.clone() } }
        }
        _ => doc! { "_id": { "$in": ids.to_vec() } },
    }
}

/// The count `n` of a `$group` result (a census or a pushdown batch count). The census
/// is what proves a migration finished, so a reply that holds no count (missing, negative,
/// fractional or of another type) is an `InvalidData` error naming `what`, never 0.
pub(crate) fn group_count(n: Option<&Bson>, what: &str) -> Result<u64, Error> {
    let count = match n {
        Some(Bson::Int32(n)) => u64::try_from(*n).ok(),
        Some(Bson::Int64(n)) => u64::try_from(*n).ok(),
        Some(Bson::Double(n)) if *n >= 0.0 && n.fract() == 0.0 && *n < 2f64.powi(63) => {
            Some(*n as u64)
        }
        _ => None,
    };
    count.ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidData,
            format!(
                "{what}: the server's $group reply holds no count (n = {})",
                n.map_or_else(|| "missing".to_owned(), ToString::to_string)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_counts_are_read_from_every_integer_type() {
        assert_eq!(group_count(Some(&Bson::Int32(3)), "census").ok(), Some(3));
        assert_eq!(group_count(Some(&Bson::Int64(5)), "census").ok(), Some(5));
        assert_eq!(
            group_count(Some(&Bson::Double(7.0)), "census").ok(),
            Some(7)
        );
    }

    #[test]
    fn an_unexpected_census_reply_is_invalid_data_not_zero() {
        for bad in [
            None,
            Some(Bson::Int64(-1)),
            Some(Bson::Int32(-4)),
            Some(Bson::Double(1.5)),
            Some(Bson::Double(-2.0)),
            Some(Bson::String("12".into())),
            Some(Bson::Null),
        ] {
            let err = group_count(bad.as_ref(), "census of kind user").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidData, "{bad:?}");
            assert!(err.to_string().contains("census of kind user"), "{err}");
        }
    }
}
