//! [`Store::update_in_place`] for MongoDB: version steps as `update_many` calls
//! on one `_id` batch, with conditions compiled to exact `$expr` tests.
//!
//! [`Store::update_in_place`]: tern_core::store::Store::update_in_place

use std::collections::HashSet;

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use tern_core::model::{Value, Version};
use tern_core::store::{
    Condition, Error, ErrorKind, PushOp, PushStep, PushdownPage, PushdownRequest, Result, pushdown,
};

use crate::backend::{MongoStore, decode_cursor, encode_cursor};
use crate::codec::{self, VERSION_FIELD};
use crate::core::{after_id, and, id_batch};

fn unsupported(why: impl Into<String>) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        format!(
            "mongodb cannot run this step exactly inside the server: {}",
            why.into()
        ),
    )
}

/// `$a.b` for a property path.
fn field_ref(path: &[String]) -> String {
    format!("${}", field_path(path))
}

/// `a.b` (escaped names) for a property path.
fn field_path(path: &[String]) -> String {
    path.iter()
        .map(|p| codec::escape_name(p))
        .collect::<Vec<_>>()
        .join(".")
}

fn type_of(path: &[String]) -> Bson {
    Bson::Document(doc! { "$type": field_ref(path) })
}

/// Every proper prefix of `path` is a document (or, with `or_missing`, absent).
fn intermediates(path: &[String], or_missing: bool) -> Vec<Bson> {
    (1..path.len())
        .map(|k| {
            let allowed: Vec<Bson> = if or_missing {
                vec!["object".into(), "missing".into()]
            } else {
                vec!["object".into()]
            };
            Bson::Document(doc! { "$in": [type_of(&path[..k]), allowed] })
        })
        .collect()
}

fn present(path: &[String]) -> Bson {
    Bson::Document(doc! { "$ne": [type_of(path), "missing"] })
}

/// Can MongoDB's `$eq` decide [`Value::loosely_equals`] against this literal?
/// Documents compare by field order in MongoDB (tern maps do not), and NaN
/// equals NaN in MongoDB (not in tern).
fn literal_is_exact(v: &Value) -> bool {
    match v {
        Value::Map(_) => false,
        Value::Float(f) => !f.is_nan(),
        Value::Array(items) => items.iter().all(literal_is_exact),
        Value::Timestamp(ms) => (codec::MIN_DATE_MS..=codec::MAX_DATE_MS).contains(ms),
        _ => true,
    }
}

/// The exact `$expr` of a [SE] atom: every step of the path is a document, the
/// property is present, and it or one of its elements equals a literal.
fn exact_condition(c: &Condition) -> Result<Bson> {
    if c.path.is_empty() || c.values.is_empty() {
        return Err(unsupported("an empty condition"));
    }
    if let Some(v) = c.values.iter().find(|v| !literal_is_exact(v)) {
        return Err(unsupported(format!(
            "condition on {} compares with {v}",
            c.path.join(".")
        )));
    }
    let r = field_ref(&c.path);
    let mut parts = intermediates(&c.path, false);
    parts.push(present(&c.path));
    let any: Vec<Bson> = c
        .values
        .iter()
        .map(|v| {
            let lit = doc! { "$literal": codec::to_bson(v) };
            Bson::Document(doc! { "$or": [
                { "$eq": [r.clone(), lit.clone()] },
                { "$and": [ { "$isArray": r.clone() }, { "$in": [lit, r.clone()] } ] },
            ] })
        })
        .collect();
    parts.push(Bson::Document(doc! { "$or": any }));
    Ok(Bson::Document(doc! { "$and": parts }))
}

/// The `$type` names a stored scalar has when tern reads it as `v`.
fn scalar_types(v: &Value) -> Option<Vec<Bson>> {
    let names: &[&str] = match v {
        Value::Null => &["null"],
        Value::Bool(_) => &["bool"],
        Value::Int(_) => &["int", "long"],
        Value::Float(f) if !f.is_nan() => &["double"],
        Value::String(_) => &["string"],
        Value::Bytes(_) => &["binData"],
        Value::Timestamp(ms) if (codec::MIN_DATE_MS..=codec::MAX_DATE_MS).contains(ms) => &["date"],
        _ => return None,
    };
    Some(
        names
            .iter()
            .map(|n| Bson::String((*n).to_owned()))
            .collect(),
    )
}

/// One compiled step: which entities it changes (an `$expr`) and the update.
struct CompiledStep {
    /// `None`: the op never changes anything (a rename onto itself).
    change: Option<(Bson, Document)>,
}

fn compile(step: &PushStep) -> Result<CompiledStep> {
    let mut parts = step
        .conditions
        .iter()
        .map(exact_condition)
        .collect::<Result<Vec<_>>>()?;
    let update = match &step.op {
        PushOp::Set { path, value } => {
            if path.is_empty() {
                return Err(unsupported("a set of an empty path"));
            }
            parts.extend(intermediates(path, true));
            // Setting the value a property already has is not a change.
            if let Some(types) = scalar_types(value) {
                let r = field_ref(path);
                parts.push(Bson::Document(doc! { "$not": [ { "$and": [
                    { "$in": [type_of(path), types] },
                    { "$eq": [r, { "$literal": codec::to_bson(value) }] },
                ] } ] }));
            }
            doc! { "$set": { field_path(path): codec::to_bson(value) } }
        }
        PushOp::Unset { path } => {
            if path.is_empty() {
                return Err(unsupported("an unset of an empty path"));
            }
            parts.extend(intermediates(path, false));
            parts.push(present(path));
            doc! { "$unset": { field_path(path): "" } }
        }
        PushOp::Rename { from, to } => {
            if from == to {
                return Ok(CompiledStep { change: None });
            }
            let from_path = [from.clone()];
            parts.push(present(&from_path));
            doc! { "$rename": { codec::escape_name(from): codec::escape_name(to) } }
        }
    };
    Ok(CompiledStep {
        change: Some((Bson::Document(doc! { "$and": parts }), update)),
    })
}

/// The query of entities at exactly `v` (a missing or null `_v` is 0).
fn at_version(v: Version) -> Result<Document> {
    if v == 0 {
        return Ok(doc! { VERSION_FIELD: { "$in": [Bson::Null, 0_i64] } });
    }
    Ok(doc! { VERSION_FIELD: codec::version_to_bson(v)? })
}

/// The top-level names a step touches, or `None` when it has conditions or no change.
fn touched(step: &PushStep, compiled: &CompiledStep) -> Option<Vec<String>> {
    if !step.conditions.is_empty() || compiled.change.is_none() {
        return None;
    }
    Some(match &step.op {
        PushOp::Set { path, .. } | PushOp::Unset { path } => vec![path.first()?.clone()],
        PushOp::Rename { from, to } => vec![from.clone(), to.clone()],
    })
}

fn as_u64(b: Option<&Bson>) -> u64 {
    match b {
        Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Double(n)) if *n >= 0.0 => *n as u64,
        _ => 0,
    }
}

impl MongoStore {
    /// The fast path: steps without conditions that touch distinct top-level
    /// properties commute, so an entity at `from` takes all of them in one
    /// update. One aggregation reads the batch's ids and every count; one
    /// `update_many` applies the steps. `None` when the path does not apply
    /// (then nothing was written).
    async fn pushdown_fast(
        &self,
        request: &PushdownRequest,
        compiled: &[CompiledStep],
        target: Version,
        limit: usize,
    ) -> Result<Option<PushdownPage>> {
        let mut names = HashSet::new();
        for (step, c) in request.steps.iter().zip(compiled) {
            let Some(touched) = touched(step, c) else {
                return Ok(None);
            };
            for n in touched {
                if !names.insert(n) {
                    return Ok(None);
                }
            }
        }
        let ctx = |op: &str, e: mongodb::error::Error| {
            crate::core::map_mongo_error(op, e)
                .with_context("store", self.location.clone())
                .with_context("kind", request.kind.clone())
        };
        let v = doc! { "$ifNull": ["$_v", 0_i64] };
        let from = codec::version_to_bson(request.from)?;
        let at_from = doc! { "$eq": [v.clone(), from.clone()] };
        let covered = doc! { "$and": [
            { "$gte": [v.clone(), from] },
            { "$lt": [v, codec::version_to_bson(target)?] },
        ] };
        let count_if = |cond: Document| doc! { "$sum": { "$cond": [cond, 1_i64, 0_i64] } };
        let mut group = doc! {
            "_id": Bson::Null,
            "ids": { "$push": "$_id" },
            "advanced": count_if(covered),
            "at_from": count_if(at_from.clone()),
        };
        let mut guards = Vec::new();
        let mut update = Document::new();
        for (i, c) in compiled.iter().enumerate() {
            let Some((guard, op)) = &c.change else {
                return Ok(None);
            };
            group.insert(
                format!("c{i}"),
                count_if(doc! { "$and": [at_from.clone(), guard.clone()] }),
            );
            guards.push(guard.clone());
            for (operator, fields) in op {
                if let Bson::Document(fields) = fields {
                    let entry = update
                        .entry(operator.clone())
                        .or_insert_with(|| Bson::Document(Document::new()));
                    if let Bson::Document(merged) = entry {
                        merged.extend(fields.clone());
                    }
                }
            }
        }
        group.insert(
            "any",
            count_if(doc! { "$and": [at_from, { "$or": guards }] }),
        );
        let coll = self.collection(&request.kind);
        // The batch's ids by `find` (SecantusDB's find uses the _id index for the
        // sort; its aggregation `$sort` + `$limit` does not), then the counts.
        let mut range = Vec::new();
        if let Some(c) = &request.cursor {
            range.push(after_id(&decode_cursor(c)?));
        }
        let ids: Vec<Bson> = coll
            .find(and(range))
            .projection(doc! { "_id": 1 })
            .sort(doc! { "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
            .await
            .map_err(|e| ctx("pushdown: reading the batch's ids", e))?
            .try_collect::<Vec<Document>>()
            .await
            .map_err(|e| ctx("pushdown: reading the batch's ids", e))?
            .into_iter()
            .filter_map(|mut d| d.remove("_id"))
            .collect();
        if ids.is_empty() {
            return Ok(Some(PushdownPage {
                changed: vec![0; request.steps.len()],
                ..PushdownPage::default()
            }));
        }
        group.remove("ids");
        let pipeline = vec![doc! { "$match": id_batch(&ids) }, doc! { "$group": group }];
        let summary: Vec<Document> = coll
            .aggregate(pipeline)
            .await
            .map_err(|e| ctx("pushdown: reading the batch", e))?
            .try_collect()
            .await
            .map_err(|e| ctx("pushdown: reading the batch", e))?;
        let Some(summary) = summary.into_iter().next() else {
            return Ok(Some(PushdownPage {
                changed: vec![0; request.steps.len()],
                ..PushdownPage::default()
            }));
        };
        let advanced = as_u64(summary.get("advanced"));
        if advanced != as_u64(summary.get("at_from")) {
            // Entities part-way through the steps: the general path handles them.
            return Ok(None);
        }
        let page = PushdownPage {
            advanced,
            changed: (0..compiled.len())
                .map(|i| as_u64(summary.get(format!("c{i}").as_str())))
                .collect(),
            changed_entities: as_u64(summary.get("any")),
            cursor: if ids.len() >= limit {
                ids.last().map(encode_cursor)
            } else {
                None
            },
        };
        if advanced > 0 {
            let set = update
                .entry("$set".to_owned())
                .or_insert_with(|| Bson::Document(Document::new()));
            if let Bson::Document(set) = set {
                set.insert(VERSION_FIELD, codec::version_to_bson(target)?);
            }
            coll.update_many(and(vec![id_batch(&ids), at_version(request.from)?]), update)
                .await
                .map_err(|e| ctx("pushdown: applying the steps", e))?;
        }
        Ok(Some(page))
    }

    /// See [`tern_core::store::Store::update_in_place`].
    pub(crate) async fn pushdown(&self, request: PushdownRequest) -> Result<PushdownPage> {
        let target = pushdown::target_version(&request)?;
        // Compile first: an unsupported step is refused before anything is written.
        let compiled = request
            .steps
            .iter()
            .map(compile)
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.with_context("kind", request.kind.clone()))?;
        let coll = self.collection(&request.kind);
        let ctx = |op: &str, e: mongodb::error::Error| {
            crate::core::map_mongo_error(op, e)
                .with_context("store", self.location.clone())
                .with_context("kind", request.kind.clone())
        };
        let limit = request.limit.clamp(1, 100_000);

        if let Some(page) = self
            .pushdown_fast(&request, &compiled, target, limit)
            .await?
        {
            return Ok(page);
        }

        // The batch: the next `limit` ids after the cursor.
        let mut range = Vec::new();
        if let Some(c) = &request.cursor {
            range.push(after_id(&decode_cursor(c)?));
        }
        let ids: Vec<Bson> = coll
            .find(and(range))
            .projection(doc! { "_id": 1 })
            .sort(doc! { "_id": 1 })
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .batch_size(u32::try_from(limit).unwrap_or(u32::MAX))
            .await
            .map_err(|e| ctx("pushdown: reading the batch's ids", e))?
            .try_collect::<Vec<Document>>()
            .await
            .map_err(|e| ctx("pushdown: reading the batch's ids", e))?
            .into_iter()
            .filter_map(|mut d| d.remove("_id"))
            .collect();
        let mut page = PushdownPage {
            advanced: 0,
            changed: vec![0; request.steps.len()],
            changed_entities: 0,
            cursor: if ids.len() >= limit {
                ids.last().map(encode_cursor)
            } else {
                None
            },
        };
        if ids.is_empty() {
            return Ok(page);
        }
        let in_batch = id_batch(&ids);

        // How many will advance: those at a version the steps cover.
        let mut covered = vec![doc! { VERSION_FIELD: {
            "$gte": codec::version_to_bson(request.from)?,
            "$lt": codec::version_to_bson(target)?,
        } }];
        if request.from == 0 {
            covered.push(doc! { VERSION_FIELD: Bson::Null });
        }
        page.advanced = coll
            .count_documents(and(vec![in_batch.clone(), doc! { "$or": covered }]))
            .await
            .map_err(|e| ctx("pushdown: counting the batch", e))?;
        if page.advanced == 0 {
            return Ok(page);
        }

        let track = compiled.iter().filter(|c| c.change.is_some()).count() > 1;
        let mut changed_ids: HashSet<String> = HashSet::new();
        for (i, step) in compiled.iter().enumerate() {
            let v = request.from + i as u64;
            let scope = and(vec![in_batch.clone(), at_version(v)?]);
            let next = codec::version_to_bson(v + 1)?;
            if let Some((expr, update)) = &step.change {
                let mut filter = scope.clone();
                filter.insert("$expr", expr.clone());
                if track {
                    // Distinct changed entities over several steps: note the ids first.
                    let found: Vec<Document> = coll
                        .find(filter.clone())
                        .projection(doc! { "_id": 1 })
                        .await
                        .map_err(|e| ctx("pushdown: finding changed entities", e))?
                        .try_collect()
                        .await
                        .map_err(|e| ctx("pushdown: finding changed entities", e))?;
                    for d in &found {
                        if let Some(id) = d.get("_id") {
                            changed_ids.insert(encode_cursor(id).0);
                        }
                    }
                }
                let mut update = update.clone();
                match update.get_document_mut("$set") {
                    Ok(set) => {
                        set.insert(VERSION_FIELD, next.clone());
                    }
                    Err(_) => {
                        update.insert("$set", doc! { VERSION_FIELD: next.clone() });
                    }
                }
                let r = coll
                    .update_many(filter, update)
                    .await
                    .map_err(|e| ctx("pushdown: applying a step", e))?;
                page.changed[i] = r.modified_count;
            }
            coll.update_many(scope, doc! { "$set": { VERSION_FIELD: next } })
                .await
                .map_err(|e| ctx("pushdown: advancing versions", e))?;
        }
        page.changed_entities = if track {
            changed_ids.len() as u64
        } else {
            page.changed.iter().sum()
        };
        Ok(page)
    }
}
