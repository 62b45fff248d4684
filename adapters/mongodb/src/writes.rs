//! [`Store::write_batch`] for MongoDB: the batch's writes go to the server as
//! `bulkWrite` commands (MongoDB 8.0+, SecantusDB), one write at a time on
//! older servers.
//!
//! A `bulkWrite` with verbose results reports every write on its own (an
//! update's matched count, an insert's duplicate-key error), so each write's
//! outcome stays exact: a compare-and-set replace that matched nothing is a
//! [`WriteOutcome::Conflict`]. The writes run unordered (the server does not
//! stop at an insert that finds its key taken); writes to the same key keep
//! their order because a batch is cut into rounds in which every key occurs
//! once, and the rounds run one after the other.
//!
//! [`Store::write_batch`]: tern_core::store::Store::write_batch

use std::collections::HashSet;

use mongodb::bson::{Bson, Document, doc};
use mongodb::error::ErrorKind as DriverKind;
use mongodb::options::{
    DeleteOneModel, InsertOneModel, ReplaceOneModel, UpdateOneModel, WriteModel,
};
use mongodb::results::VerboseBulkWriteResult;
use tern_core::model::Entity;
use tern_core::store::{Error, ErrorKind, Result, Write, WriteOutcome};

use crate::codec;
use crate::core::{DUPLICATE_KEY, MongoStore, is_duplicate_key};

/// How MongoDB identifies a document: the kind and the `_id` as its unique
/// index compares it (numbers by value, so `1`, `1.0` and `Int64(1)` are one key).
fn identity(w: &Write) -> (String, String) {
    let key = w.key();
    let id = match codec::id_to_bson(&key.id) {
        Bson::Int32(i) => format!("n{i}"),
        Bson::Int64(i) => format!("n{i}"),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => format!("n{}", d as i64),
        Bson::Double(d) => format!("d{}", d.to_bits()),
        other => other.into_canonical_extjson().to_string(),
    };
    (key.kind.clone(), id)
}

/// Cuts `writes` into consecutive rounds in which no document occurs twice;
/// returns the index ranges.
fn rounds(writes: &[Write]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut start = 0;
    for (i, w) in writes.iter().enumerate() {
        if !seen.insert(identity(w)) {
            out.push(start..i);
            start = i;
            seen.clear();
            seen.insert(identity(w));
        }
    }
    if start < writes.len() {
        out.push(start..writes.len());
    }
    out
}

/// The test that a stored document is exactly `expected`, as an aggregation
/// expression over the document: the version, every stored field equal to the
/// expected value (with its BSON type), and no other fields.
fn expected_expr(expected: &Entity) -> Result<Document> {
    let mut conds: Vec<Bson> = Vec::new();
    let n = i64::try_from(expected.value.len()).unwrap_or(i64::MAX);
    if expected.version == 0 {
        conds.push(Bson::Document(
            doc! { "$eq": [ { "$ifNull": ["$_v", 0_i64] }, 0_i64 ] },
        ));
        conds.push(Bson::Document(doc! { "$eq": [
            { "$size": { "$objectToArray": "$$ROOT" } },
            { "$add": [ n + 1, { "$cond": [ { "$eq": [ { "$type": "$_v" }, "missing" ] }, 0_i64, 1_i64 ] } ] },
        ] }));
    } else {
        conds.push(Bson::Document(
            doc! { "$eq": [ "$_v", codec::version_to_bson(expected.version)? ] },
        ));
        conds.push(Bson::Document(
            doc! { "$eq": [ { "$size": { "$objectToArray": "$$ROOT" } }, n + 2 ] },
        ));
    }
    let root = Bson::String("$$ROOT".into());
    for (name, value) in &expected.value {
        field_equal(
            &codec::escape_name(name),
            &root,
            codec::to_bson(value),
            &mut conds,
        );
    }
    Ok(doc! { "$and": conds })
}

/// Pushes onto `conds` the tests that the stored field `field` (a name as
/// [`codec::escape_name`] writes it) of the document `input` (an expression)
/// is `lit` ([`equal_at`]). A plain name is read as a field path (at the top)
/// or with `$getField`. A dotted or `$` name may be stored as it is or in its
/// legacy form (what tern wrote before 2026-11-29,
/// [`codec::legacy_field_name`]): the field is found among the document's
/// fields (`$objectToArray`) under either name, its presence tested first
/// and its value compared only then. (Not `$type` of a `$getField`:
/// SecantusDB 0.7.0b3 answers "object" for a missing field there.)
fn field_equal(field: &str, input: &Bson, lit: Bson, conds: &mut Vec<Bson>) {
    let Some(legacy) = codec::legacy_of_field(field) else {
        let at = if input.as_str() == Some("$$ROOT") {
            Bson::String(format!("${field}"))
        } else {
            Bson::Document(
                doc! { "$getField": { "field": { "$literal": field }, "input": input.clone() } },
            )
        };
        return equal_at(at, lit, conds);
    };
    let (present, value) = stored_field(field, &legacy, input);
    let mut inner = Vec::new();
    equal_at(value, lit, &mut inner);
    conds.push(Bson::Document(
        doc! { "$cond": [ present, { "$and": inner }, false ] },
    ));
}

/// Whether the document `input` (an expression) holds the stored field
/// `field` or its other form `legacy`, and its value (missing when it holds
/// neither), found among the document's fields (`$objectToArray`): a dotted
/// or `$` name is no field path, and SecantusDB's `$type` of a `$getField`
/// of a missing field is no answer (see [`field_equal`]).
pub(crate) fn stored_field(field: &str, legacy: &str, input: &Bson) -> (Bson, Bson) {
    let found = doc! { "$filter": {
        "input": { "$objectToArray": input.clone() },
        "as": "f",
        "cond": { "$in": [ "$$f.k", [ { "$literal": field }, { "$literal": legacy } ] ] },
    } };
    let present = doc! { "$gt": [ { "$size": found.clone() }, 0_i64 ] };
    let value = doc! { "$arrayElemAt": [
        { "$map": { "input": found, "as": "f", "in": "$$f.v" } },
        0_i64,
    ] };
    (Bson::Document(present), Bson::Document(value))
}

/// Does `lit` hold, at any depth, a document with a field stored in two
/// forms ([`codec::legacy_of_field`])? Compared as a whole, it would not
/// match the document in its legacy form.
fn has_two_form_field(lit: &Bson) -> bool {
    match lit {
        Bson::Document(d) => d
            .iter()
            .any(|(k, v)| codec::legacy_of_field(k).is_some() || has_two_form_field(v)),
        Bson::Array(a) => a.iter().any(has_two_form_field),
        _ => false,
    }
}

/// Does comparing `lit` with `$eq` depend on the order of fields inside it (a
/// document of two or more fields, at any depth)? MongoDB compares embedded
/// documents field by field in order (its `$eq` and sort order), so
/// `{zip, city}` as the application wrote it is not `{city, zip}` as tern
/// (whose maps are sorted) writes the literal.
fn order_matters(lit: &Bson) -> bool {
    match lit {
        Bson::Document(d) => d.len() > 1 || d.values().any(order_matters),
        Bson::Array(a) => a.iter().any(order_matters),
        _ => false,
    }
}

/// Pushes onto `conds` the tests that the value of the expression `at` is
/// `lit`, with its BSON type, whatever the order of the fields of the
/// documents inside it: a document whose order matters is compared field by
/// field (its type, its number of fields, each field by `$getField`), an
/// array holding one element by element (its length, each by
/// `$arrayElemAt`); anything else with one `$eq` against the literal. A
/// document holding a dotted or `$` name is compared field by field too,
/// each field in either of its stored forms ([`field_equal`]). Each
/// level's tests run only once its type is known (`$cond`), so a stored
/// value of another shape is a failed test, never an error of the server.
fn equal_at(at: Bson, lit: Bson, conds: &mut Vec<Bson>) {
    if !order_matters(&lit) && !has_two_form_field(&lit) {
        push_literal(at, lit, conds);
        return;
    }
    let mut inner = Vec::new();
    let is_type = match lit {
        Bson::Document(d) => {
            let n = i64::try_from(d.len()).unwrap_or(i64::MAX);
            inner.push(Bson::Document(
                doc! { "$eq": [ { "$size": { "$objectToArray": at.clone() } }, n ] },
            ));
            for (name, value) in d {
                field_equal(&name, &at, value, &mut inner);
            }
            doc! { "$eq": [ { "$type": at }, "object" ] }
        }
        Bson::Array(items) => {
            let n = i64::try_from(items.len()).unwrap_or(i64::MAX);
            inner.push(Bson::Document(
                doc! { "$eq": [ { "$size": at.clone() }, n ] },
            ));
            for (i, value) in (0_i64..).zip(items) {
                let item = doc! { "$arrayElemAt": [ at.clone(), i ] };
                equal_at(Bson::Document(item), value, &mut inner);
            }
            doc! { "$isArray": [ at ] }
        }
        // `order_matters` and `has_two_form_field` hold for documents and arrays only.
        scalar => return push_literal(at, scalar, conds),
    };
    conds.push(Bson::Document(
        doc! { "$cond": [ is_type, { "$and": inner }, false ] },
    ));
}

/// Pushes the tests that `at` is `lit` as one `$eq` against the literal, and
/// of a BSON type tern reads as `lit`'s ([`codec::types_read_alike`]).
fn push_literal(at: Bson, lit: Bson, conds: &mut Vec<Bson>) {
    conds.push(Bson::Document(
        doc! { "$in": [ { "$type": at.clone() }, codec::types_read_alike(&lit) ] },
    ));
    conds.push(Bson::Document(doc! { "$eq": [ at, { "$literal": lit } ] }));
}

/// The filter of a compare-and-set replace: the `_id`, the version, and every
/// stored field equal to the expected value, with no other fields.
pub(crate) fn replace_filter(expected: &Entity) -> Result<Document> {
    // `$and` of the two, not one document with both: SecantusDB's Rust
    // build does not use the `_id` index when `$expr` sits next to `_id` (a
    // collection scan per write), but does inside `$and`. (Its Python build
    // scans the collection for either; see [`conditional_replace`].)
    Ok(doc! { "$and": [
        { "_id": codec::id_to_bson(&expected.key.id) },
        { "$expr": expected_expr(expected)? },
    ] })
}

/// Does this compare-and-set replace go to the server as a
/// [`conditional_replace`] (the test inside the update) rather than a
/// `replaceOne` filtered by [`replace_filter`]? When the version changes,
/// which is every replace of a migration, lazy read or sweep: the new
/// document then always differs from the stored one, so "modified" means
/// "the test held".
fn is_conditional(expected: &Entity, new: &Entity) -> bool {
    expected.version != new.version
}

/// A compare-and-set replace as an update of the one document with the `_id`
/// (a point lookup on every server) whose pipeline replaces the document with
/// `new` when it is exactly `expected` ([`expected_expr`], the test of
/// [`replace_filter`]) and leaves it as it is otherwise: `(filter, pipeline)`.
/// The write applied when the update modified the document, which it does iff
/// the test held, since `new`'s version differs from the stored one
/// ([`is_conditional`]).
///
/// Why not the filter: SecantusDB's Python build (0.7.0b3) looks a write's
/// documents up by `_id` only for a filter without top-level operators, so a
/// filter holding `$expr` (or `$and`) scans the whole collection for every
/// write: 49 ms a replace with 2,000 documents in the collection, 187 ms
/// with 8,000, against 1.8 ms for this form (measured 2026-11-26).
pub(crate) fn conditional_replace(
    expected: &Entity,
    new: &Entity,
) -> Result<(Document, Vec<Document>)> {
    let filter = doc! { "_id": codec::id_to_bson(&expected.key.id) };
    let pipeline = vec![doc! { "$replaceWith": { "$cond": [
        expected_expr(expected)?,
        expr_of(&Bson::Document(codec::entity_to_document(new)?)),
        "$$ROOT",
    ] } }];
    Ok((filter, pipeline))
}

/// The update pipeline that replaces a document by `doc` when `doc` cannot be
/// a replacement document: a top-level `$` name ("not allowed in the context
/// of an update's replacement", MongoDB and SecantusDB) or a dotted one;
/// `None` for every other document, which goes as a plain replacement.
pub(crate) fn replacement_pipeline(doc: &Document) -> Option<Vec<Document>> {
    doc.keys()
        .any(|k| k.starts_with('$') || k.contains('.'))
        .then(|| vec![doc! { "$replaceWith": expr_of(&Bson::Document(doc.clone())) }])
}

/// An aggregation expression whose value is exactly `value`: a `$literal`,
/// except for a document holding a `$` name (at any depth), which is built
/// by `$arrayToObject` from its fields (names under `$literal`, each value an
/// expression of its own), and an array of such documents.
///
/// Why: SecantusDB 0.7.0b3 parses operators even inside `$literal`, so a
/// stored `{"$map": {"$float": 1}}` (a plain field named `$map`) under a
/// `$literal` fails ("Unrecognized parameter to $map"); MongoDB takes a
/// `$literal` as it is, and either form gives it the same value.
pub(crate) fn expr_of(value: &Bson) -> Bson {
    fn has_dollar_name(b: &Bson) -> bool {
        match b {
            Bson::Document(d) => d
                .iter()
                .any(|(k, v)| k.starts_with('$') || has_dollar_name(v)),
            Bson::Array(a) => a.iter().any(has_dollar_name),
            _ => false,
        }
    }
    match value {
        Bson::Document(d) if has_dollar_name(value) => {
            let fields: Vec<Bson> = d
                .iter()
                .map(|(k, v)| Bson::Document(doc! { "k": { "$literal": k }, "v": expr_of(v) }))
                .collect();
            Bson::Document(doc! { "$arrayToObject": [ Bson::Array(fields) ] })
        }
        Bson::Array(items) if has_dollar_name(value) => {
            Bson::Array(items.iter().map(expr_of).collect())
        }
        other => Bson::Document(doc! { "$literal": other.clone() }),
    }
}

/// A replace (`filter`, `doc`) as a `bulkWrite` model: a replacement, or an
/// update by [`replacement_pipeline`].
fn replace_model(
    namespace: mongodb::Namespace,
    filter: Document,
    doc: Document,
    upsert: bool,
) -> WriteModel {
    match replacement_pipeline(&doc) {
        Some(pipeline) => UpdateOneModel::builder()
            .namespace(namespace)
            .filter(filter)
            .update(pipeline)
            .upsert(upsert)
            .build()
            .into(),
        None => ReplaceOneModel::builder()
            .namespace(namespace)
            .filter(filter)
            .replacement(doc)
            .upsert(upsert)
            .build()
            .into(),
    }
}

/// The filter matching `stored` exactly as it is now: the same `_id` (and its
/// BSON type), every field with the same BSON type and value, and no other
/// field. Built from a stored document itself (not from its tern decoding), so
/// it also matches documents tern did not write (an Int32, an unescaped name).
/// As with [`replace_filter`], values nested inside documents and arrays
/// compare as MongoDB's `$eq` does (numbers by value).
pub(crate) fn document_filter(stored: &Document) -> Document {
    let id = stored.get("_id").cloned().unwrap_or(Bson::Null);
    let n = i64::try_from(stored.len()).unwrap_or(i64::MAX);
    let mut conds: Vec<Bson> = vec![Bson::Document(
        doc! { "$eq": [ { "$size": { "$objectToArray": "$$ROOT" } }, n ] },
    )];
    for (name, value) in stored {
        // A name that is not a plain path ($-prefixed, dotted, empty) is read with $getField.
        let field = if name.is_empty() || name.starts_with('$') || name.contains('.') {
            Bson::Document(
                doc! { "$getField": { "field": { "$literal": name }, "input": "$$ROOT" } },
            )
        } else {
            Bson::String(format!("${name}"))
        };
        conds.push(Bson::Document(
            doc! { "$eq": [ { "$type": field.clone() }, codec::type_name(value) ] },
        ));
        conds.push(Bson::Document(doc! { "$eq": [ field, expr_of(value) ] }));
    }
    // `$and` of the two: see `replace_filter`.
    doc! { "$and": [
        { "_id": id },
        { "$expr": { "$and": conds } },
    ] }
}

/// The write errors of a `bulkWrite`, by the index of the write.
type BulkWriteErrors = std::collections::HashMap<usize, mongodb::error::WriteError>;

/// The outcome of write `i` of a `bulkWrite`, from its results and its write
/// errors (those left are an insert meeting its key: a conflict); `None` when
/// the server reported nothing for it.
fn bulk_outcome(
    i: usize,
    w: &Write,
    results: &VerboseBulkWriteResult,
    errors: &BulkWriteErrors,
) -> Option<WriteOutcome> {
    if errors.contains_key(&i) {
        return Some(WriteOutcome::Conflict);
    }
    match w {
        Write::Insert(_) => results
            .insert_results
            .get(&i)
            .map(|_| WriteOutcome::Applied),
        Write::Put(_) => results
            .update_results
            .get(&i)
            .map(|_| WriteOutcome::Applied),
        Write::Replace { expected, new } => results.update_results.get(&i).map(|r| {
            let applied = if is_conditional(expected, new) {
                r.modified_count == 1
            } else {
                r.matched_count == 1
            };
            if applied {
                WriteOutcome::Applied
            } else {
                WriteOutcome::Conflict
            }
        }),
        Write::Delete(_) => results
            .delete_results
            .get(&i)
            .map(|_| WriteOutcome::Applied),
    }
}

impl MongoStore {
    /// See [`tern_core::store::Store::write_batch`] (the batch is checked).
    pub(crate) async fn write_all(&self, writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        if !self.bulk_write {
            let mut outcomes = Vec::with_capacity(writes.len());
            for w in writes {
                outcomes.push(self.write_one(w).await?);
            }
            return Ok(outcomes);
        }
        let mut outcomes = Vec::with_capacity(writes.len());
        for round in rounds(&writes) {
            outcomes.extend(self.bulk_round(&writes[round]).await?);
        }
        Ok(outcomes)
    }

    /// One `bulkWrite` (the driver splits it by the server's size limits) of
    /// writes to distinct documents.
    async fn bulk_round(&self, writes: &[Write]) -> Result<Vec<WriteOutcome>> {
        let models = writes
            .iter()
            .map(|w| self.write_model(w))
            .collect::<Result<Vec<WriteModel>>>()?;
        let started = std::time::Instant::now();
        let reply = self
            .client
            .bulk_write(models)
            .ordered(false)
            .verbose_results()
            .await;
        tracing::debug!(
            writes = writes.len(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "bulk write"
        );
        let (results, errors) = match reply {
            Ok(r) => (r, Default::default()),
            Err(e) => self.partial_bulk_result(writes, e)?,
        };
        writes
            .iter()
            .enumerate()
            .map(|(i, w)| {
                bulk_outcome(i, w, &results, &errors).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Unexpected,
                        format!(
                            "mongodb: the server reported no result for write {i} of a bulk write"
                        ),
                    )
                    .with_context("store", self.location.clone())
                })
            })
            .collect()
    }

    /// The `bulkWrite` model of a write.
    fn write_model(&self, w: &Write) -> Result<WriteModel> {
        Ok(match w {
            Write::Put(e) => replace_model(
                self.collection(&e.key.kind).namespace(),
                doc! { "_id": codec::id_to_bson(&e.key.id) },
                codec::entity_to_document(e)?,
                true,
            ),
            Write::Insert(e) => InsertOneModel::builder()
                .namespace(self.collection(&e.key.kind).namespace())
                .document(codec::entity_to_document(e)?)
                .build()
                .into(),
            Write::Replace { expected, new } if is_conditional(expected, new) => {
                let (filter, pipeline) = conditional_replace(expected, new)?;
                UpdateOneModel::builder()
                    .namespace(self.collection(&new.key.kind).namespace())
                    .filter(filter)
                    .update(pipeline)
                    .build()
                    .into()
            }
            Write::Replace { expected, new } => replace_model(
                self.collection(&new.key.kind).namespace(),
                replace_filter(expected)?,
                codec::entity_to_document(new)?,
                false,
            ),
            Write::Delete(key) => DeleteOneModel::builder()
                .namespace(self.collection(&key.kind).namespace())
                .filter(doc! { "_id": codec::id_to_bson(&key.id) })
                .build()
                .into(),
        })
    }

    /// What a `bulkWrite` that failed did: its partial results and the write errors
    /// that are outcomes (an insert meeting its key). Any other failure is an error:
    /// then the outcome of the writes is unknown or a write was refused.
    fn partial_bulk_result(
        &self,
        writes: &[Write],
        e: mongodb::error::Error,
    ) -> Result<(VerboseBulkWriteResult, BulkWriteErrors)> {
        let DriverKind::BulkWrite(bw) = e.kind.as_ref() else {
            return Err(self.err("bulk write", e));
        };
        // A top-level error (the source) or a write concern error: the outcome of
        // every write is unknown.
        if std::error::Error::source(&e).is_some() || !bw.write_concern_errors.is_empty() {
            return Err(self.err("bulk write", e));
        }
        let results = match &bw.partial_result {
            Some(mongodb::error::PartialBulkWriteResult::Verbose(r)) => r.clone(),
            Some(mongodb::error::PartialBulkWriteResult::Summary(_)) => {
                return Err(self.err("bulk write", e));
            }
            None => VerboseBulkWriteResult::default(),
        };
        let errors = bw.write_errors.clone();
        // Only an insert meeting its key is an outcome; any other write error fails.
        if let Some((&i, w)) = errors.iter().find(|(i, w)| {
            !(w.code == DUPLICATE_KEY && matches!(writes.get(**i), Some(Write::Insert(_))))
        }) {
            let key = writes.get(i).map(|w| identity(w).1).unwrap_or_default();
            return Err(Error::new(
                ErrorKind::Rejected,
                format!(
                    "mongodb: write {i} of the batch failed: {} (code {})",
                    w.message, w.code
                ),
            )
            .with_context("key", key)
            .with_context("store", self.location.clone()));
        }
        Ok((results, errors))
    }

    /// Replaces the document of `kind` that `filter` matches by `doc`: a
    /// replacement, or an update by [`replacement_pipeline`].
    async fn replace_doc(
        &self,
        kind: &str,
        filter: Document,
        doc: Document,
        upsert: bool,
    ) -> mongodb::error::Result<mongodb::results::UpdateResult> {
        let coll = self.collection(kind);
        match replacement_pipeline(&doc) {
            Some(pipeline) => coll.update_one(filter, pipeline).upsert(upsert).await,
            None => coll.replace_one(filter, doc).upsert(upsert).await,
        }
    }

    /// One write, on a server without `bulkWrite` (MongoDB before 8.0, whose
    /// planner finds a [`replace_filter`]'s document by `_id`; the pipeline
    /// form of [`conditional_replace`] would also need 4.2).
    async fn write_one(&self, w: Write) -> Result<WriteOutcome> {
        match w {
            Write::Put(e) => {
                let d = codec::entity_to_document(&e)?;
                let filter = doc! { "_id": codec::id_to_bson(&e.key.id) };
                self.replace_doc(&e.key.kind, filter, d, true)
                    .await
                    .map_err(|err| self.err("put", err).with_context("key", e.key.to_string()))?;
                Ok(WriteOutcome::Applied)
            }
            Write::Insert(e) => {
                let d = codec::entity_to_document(&e)?;
                match self.collection(&e.key.kind).insert_one(d).await {
                    Ok(_) => Ok(WriteOutcome::Applied),
                    Err(err) if is_duplicate_key(&err) => Ok(WriteOutcome::Conflict),
                    Err(err) => Err(self
                        .err("insert", err)
                        .with_context("key", e.key.to_string())),
                }
            }
            Write::Replace { expected, new } => {
                let d = codec::entity_to_document(&new)?;
                let filter = replace_filter(&expected)?;
                let r = self
                    .replace_doc(&new.key.kind, filter, d, false)
                    .await
                    .map_err(|err| {
                        self.err("replace", err)
                            .with_context("key", new.key.to_string())
                    })?;
                Ok(if r.matched_count == 1 {
                    WriteOutcome::Applied
                } else {
                    WriteOutcome::Conflict
                })
            }
            Write::Delete(key) => {
                self.collection(&key.kind)
                    .delete_one(doc! { "_id": codec::id_to_bson(&key.id) })
                    .await
                    .map_err(|err| self.err("delete", err).with_context("key", key.to_string()))?;
                Ok(WriteOutcome::Applied)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tern_core::model::{Key, Value};

    use super::*;

    fn put(kind: &str, id: Value) -> Write {
        Write::Put(Entity::new(Key::new(kind, id).unwrap(), Default::default()))
    }

    #[test]
    fn a_replace_that_changes_the_version_selects_by_id_alone() {
        let mut value = tern_core::model::Map::new();
        value.insert("title".into(), Value::from("$title"));
        let expected = Entity {
            key: Key::new("post", Value::Int(7)).unwrap(),
            version: 2,
            value,
        };
        let mut new = expected.clone();
        new.version = 3;
        assert!(is_conditional(&expected, &new));
        assert!(!is_conditional(&expected, &expected));
        let (filter, pipeline) = conditional_replace(&expected, &new).unwrap();
        // No top-level operator: every server finds the document by `_id`.
        assert_eq!(filter, doc! { "_id": 7_i64 });
        // The new document goes in as a literal (a "$title" value is no field path),
        // the stored one stays when the test fails.
        let stage = pipeline[0].get_document("$replaceWith").unwrap();
        let cond = stage.get_array("$cond").unwrap();
        assert_eq!(cond[0], Bson::Document(expected_expr(&expected).unwrap()));
        assert_eq!(
            cond[1],
            Bson::Document(doc! { "$literal": codec::entity_to_document(&new).unwrap() })
        );
        assert_eq!(cond[2], Bson::String("$$ROOT".into()));
    }

    /// Every value under a `$literal` in `b`, and those a `$eq` compares with.
    fn literals(b: &Bson, all: &mut Vec<Bson>, compared: &mut Vec<Bson>) {
        match b {
            Bson::Document(d) => {
                for (k, v) in d {
                    if k == "$literal" {
                        all.push(v.clone());
                        continue;
                    }
                    if let (true, Bson::Array(args)) = (k == "$eq", v)
                        && let Some(Bson::Document(rhs)) = args.get(1)
                        && let Some(lit) = rhs.get("$literal")
                    {
                        compared.push(lit.clone());
                    }
                    literals(v, all, compared);
                }
            }
            Bson::Array(a) => a.iter().for_each(|v| literals(v, all, compared)),
            _ => {}
        }
    }

    /// MongoDB compares embedded documents field by field in order, and tern
    /// writes its maps sorted: the compare-and-set never compares a literal
    /// document of two or more fields, at any depth, so a document the
    /// application wrote in its own order still matches.
    #[test]
    fn no_literal_of_a_compare_and_set_depends_on_field_order() {
        let json = r#"{"addr": {"zip": 1, "city": "x", "geo": {"lat": 1.5, "lng": 2.5}},
                       "tags": [{"t": "a", "n": 1}, "plain", [{"y": 1, "x": 2}]],
                       "one": {"k": [1, 2]}, "list": [1, "a"], "n": 3}"#;
        let value =
            tern_core::model::json::json_to_map(&serde_json::from_str(json).unwrap()).unwrap();
        let expected = Entity {
            key: Key::new("post", Value::Int(7)).unwrap(),
            version: 2,
            value,
        };
        let (mut all, mut found) = (Vec::new(), Vec::new());
        literals(
            &Bson::Document(expected_expr(&expected).unwrap()),
            &mut all,
            &mut found,
        );
        for lit in &all {
            assert!(!order_matters(lit), "compared as a whole: {lit}");
        }
        // Every leaf is still compared, and what cannot depend on order whole.
        for leaf in [
            Bson::Int64(1),
            Bson::String("x".into()),
            Bson::Double(1.5),
            Bson::Double(2.5),
            Bson::String("a".into()),
            Bson::String("plain".into()),
            Bson::Int64(2),
            Bson::Document(doc! { "k": [1_i64, 2_i64] }),
            Bson::Array(vec![Bson::Int64(1), Bson::String("a".into())]),
            Bson::Int64(3),
        ] {
            assert!(found.contains(&leaf), "{leaf} not compared");
        }
        assert_eq!(found.len(), 12, "{found:?}");
    }

    #[test]
    fn a_batch_is_cut_where_a_document_repeats() {
        let writes = vec![
            put("a", Value::Int(1)),
            put("b", Value::Int(1)),
            put("a", Value::Int(2)),
            put("a", Value::Int(1)),
            put("a", Value::from("1")),
            put("a", Value::from("1")),
            put("a", Value::Int(3)),
        ];
        assert_eq!(rounds(&writes), vec![0..3, 3..5, 5..7]);
        assert_eq!(rounds(&[]), Vec::<std::ops::Range<usize>>::new());
    }
}
