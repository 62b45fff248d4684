//! [`Store::update_in_place`] for MongoDB: version steps as `update_many` calls
//! on one `_id` batch, with conditions compiled to exact `$expr` tests (and, on
//! the fast path, the test of which entities a step changes as a plain query).
//!
//! [`Store::update_in_place`]: tern_core::store::Store::update_in_place

use std::collections::HashSet;
use std::time::Instant;

use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use tern_core::model::{Value, Version};
use tern_core::store::{
    Condition, Cursor, Error, ErrorKind, PushOp, PushStep, PushdownPage, PushdownRequest, Result,
    pushdown,
};

use crate::codec::{self, VERSION_FIELD};
use crate::core::{MongoStore, and, encode_cursor, id_batch};
use crate::writes::stored_field;

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

/// The `$type` names a stored scalar has when tern reads it as `v`
/// ([`codec::types_read_alike`]); `None` for a map, an array, NaN or a
/// timestamp outside BSON's dates.
fn scalar_types(v: &Value) -> Option<Vec<Bson>> {
    match v {
        Value::Map(_) | Value::Array(_) => None,
        Value::Float(f) if f.is_nan() => None,
        Value::Timestamp(ms) if !(codec::MIN_DATE_MS..=codec::MAX_DATE_MS).contains(ms) => None,
        scalar => Some(
            codec::types_read_alike(&codec::to_bson(scalar))
                .into_iter()
                .map(Bson::from)
                .collect(),
        ),
    }
}

/// The update of a compiled step.
#[derive(Clone)]
enum Update {
    /// Update operators (`$set`, `$unset`, `$rename`).
    Ops(Document),
    /// An update pipeline: a step on a dotted or `$` top-level name
    /// ([`pipeline_step`]).
    Pipeline(Vec<Document>),
}

/// One compiled step: which entities it changes (an `$expr`) and the update.
struct CompiledStep {
    /// `None`: the op never changes anything (a rename onto itself).
    change: Option<(Bson, Update)>,
}

/// The stored field of property `name` in the document being updated: whether
/// it is there (in either stored form) and its value ([`stored_field`]).
fn stored(name: &str) -> (Bson, Bson) {
    let field = codec::escape_name(name);
    let legacy = codec::legacy_of_field(&field).unwrap_or_else(|| field.clone());
    stored_field(&field, &legacy, &Bson::String("$$ROOT".into()))
}

/// `input` with property `name` set to `value` (an expression), or removed
/// with `$$REMOVE`, under its stored name ([`codec::escape_name`]).
fn set_field(input: Bson, name: &str, value: Bson) -> Bson {
    let field = codec::escape_name(name);
    Bson::Document(
        doc! { "$setField": { "field": { "$literal": field }, "input": input, "value": value } },
    )
}

/// `input` without property `name`, in either stored form.
fn without(input: Bson, name: &str) -> Bson {
    let input = match codec::legacy_field_name(name) {
        Some(legacy) => Bson::Document(doc! { "$setField": {
            "field": { "$literal": legacy }, "input": input, "value": "$$REMOVE",
        } }),
        None => input,
    };
    set_field(input, name, "$$REMOVE".into())
}

/// A step that sets, unsets or renames a top-level property, one of them a
/// dotted or `$` name, as an update pipeline: `$setField` (with `$$REMOVE`)
/// under the name as it is, removing the legacy form
/// ([`codec::legacy_field_name`]) too; which entities it changes tested on
/// the field in either form. `None` for any other step with such a name
/// (nested, or in a condition): declined.
fn pipeline_step(step: &PushStep) -> Result<Option<CompiledStep>> {
    if step
        .conditions
        .iter()
        .any(|c| c.path.iter().any(|p| codec::has_two_forms(p)))
    {
        return Ok(None);
    }
    let mut parts = step
        .conditions
        .iter()
        .map(exact_condition)
        .collect::<Result<Vec<_>>>()?;
    let root = Bson::String("$$ROOT".into());
    let new = match &step.op {
        PushOp::Set { path, value } if path.len() == 1 => {
            let name = &path[0];
            if let Some(types) = scalar_types(value) {
                let (present, current) = stored(name);
                parts.push(Bson::Document(doc! { "$not": [ { "$and": [
                    present,
                    { "$in": [ { "$type": current.clone() }, types ] },
                    { "$eq": [ current, { "$literal": codec::to_bson(value) } ] },
                ] } ] }));
            }
            let value = crate::writes::expr_of(&codec::to_bson(value));
            set_field(without(root, name), name, value)
        }
        PushOp::Unset { path } if path.len() == 1 => {
            parts.push(stored(&path[0]).0);
            without(root, &path[0])
        }
        PushOp::Rename { from, to } => {
            if from == to {
                return Ok(Some(CompiledStep { change: None }));
            }
            let (present, value) = stored(from);
            parts.push(present);
            set_field(without(without(root, from), to), to, value)
        }
        PushOp::Set { .. } | PushOp::Unset { .. } => return Ok(None),
    };
    Ok(Some(CompiledStep {
        change: Some((
            Bson::Document(doc! { "$and": parts }),
            Update::Pipeline(vec![doc! { "$replaceWith": new }]),
        )),
    }))
}

/// A dotted or `$` name the step addresses or writes ([`codec::has_two_forms`]):
/// the server would take it for a path or an operator, and the property may be
/// stored under either of two names (its legacy escaped form), so such a step
/// runs as an update pipeline ([`pipeline_step`]) where it can, and on the
/// client otherwise (see docs.md, "Dotted and `$`-prefixed field names").
fn two_form_name(step: &PushStep) -> Option<String> {
    /// A dotted or `$` field name in the BSON a value is written as (a tag
    /// such as `{"$oid": ..}` is written as its BSON type, no document).
    fn in_value(v: &Bson) -> Option<String> {
        match v {
            Bson::Document(d) => d.iter().find_map(|(k, v)| {
                if k.starts_with('$') || k.contains('.') {
                    Some(k.clone())
                } else {
                    in_value(v)
                }
            }),
            Bson::Array(items) => items.iter().find_map(in_value),
            _ => None,
        }
    }
    let in_path = |path: &[String]| path.iter().find(|p| codec::has_two_forms(p)).cloned();
    let op = match &step.op {
        PushOp::Set { path, value } => in_path(path).or_else(|| in_value(&codec::to_bson(value))),
        PushOp::Unset { path } => in_path(path),
        PushOp::Rename { from, to } => in_path(&[from.clone(), to.clone()]),
    };
    op.or_else(|| step.conditions.iter().find_map(|c| in_path(&c.path)))
}

fn compile(step: &PushStep) -> Result<CompiledStep> {
    if let Some(name) = two_form_name(step) {
        if let Some(compiled) = pipeline_step(step)? {
            return Ok(compiled);
        }
        return Err(unsupported(format!(
            "property {name:?} is dotted or starts with `$` and the step addresses it in a \
             condition or under a nested path (only a set, unset or rename of a top-level \
             property runs inside the server for such names)"
        )));
    }
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
        change: Some((Bson::Document(doc! { "$and": parts }), Update::Ops(update))),
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
        // A nested path may meet a non-document on the way, which would fail the
        // whole `update_many`: the general path applies it only where it can.
        PushOp::Set { path, .. } | PushOp::Unset { path } if path.len() == 1 => {
            vec![path[0].clone()]
        }
        PushOp::Set { .. } | PushOp::Unset { .. } => return None,
        PushOp::Rename { from, to } => vec![from.clone(), to.clone()],
    })
}

/// A version as a `$group` key gives it: `None` for what tern does not read as a version.
fn group_version(b: Option<&Bson>) -> Option<i128> {
    match b {
        None | Some(Bson::Null) => Some(0),
        Some(Bson::Int32(n)) => Some(i128::from(*n)),
        Some(Bson::Int64(n)) => Some(i128::from(*n)),
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(*d as i128),
        _ => None,
    }
}

/// Which entities `step` changes, as a plain query (no `$expr`), for a step of
/// the fast path: no conditions, one top-level property. Plain query operators
/// cost a server less than evaluating the same test as an `$expr` (SecantusDB:
/// 10% less per batch update). `None` where [`touched`] would refuse the step.
///
/// Exactness: a query path walks into arrays (`{a: 0}` matches `[0, 1]`), so
/// "already this value" also requires the property not to be an array; `$eq`
/// compares numbers across types and `{a: null}` matches a missing `a`, so the
/// BSON type is required to be one tern reads as the literal's type.
fn plain_guard(step: &PushStep) -> Option<Document> {
    if !step.conditions.is_empty() {
        return None;
    }
    match &step.op {
        PushOp::Set { path, value } if path.len() == 1 => {
            let name = field_path(path);
            let Some(types) = scalar_types(value) else {
                // A map, an array or NaN: every entity changes (as the `$expr` says).
                return Some(Document::new());
            };
            Some(doc! { "$nor": [ { "$and": [
                { name.clone(): { "$eq": codec::to_bson(value) } },
                { name.clone(): { "$type": types } },
                { name: { "$not": { "$type": "array" } } },
            ] } ] })
        }
        PushOp::Unset { path } if path.len() == 1 => {
            Some(doc! { field_path(path): { "$exists": true } })
        }
        PushOp::Rename { from, to } if from != to => {
            Some(doc! { codec::escape_name(from): { "$exists": true } })
        }
        _ => None,
    }
}

/// What the fast path did.
enum Fast {
    /// The batch is done.
    Done(PushdownPage),
    /// The general path must run the batch. `moved` entities were already
    /// brought to the target by the optimistic update, every step changing them.
    General { moved: u64 },
}

/// What the fast path sends: the `$group` key that tells which steps change an
/// entity, the guards that every step changes it, and the merged update.
struct FastPlan {
    key: Document,
    guards: Vec<Document>,
    update: Document,
}

/// One batch of a pushdown run: its request, the compiled steps, the version
/// they lead to, the ids of the batch and the cursor after it.
struct Batch<'a> {
    request: &'a PushdownRequest,
    compiled: &'a [CompiledStep],
    target: Version,
    ids: &'a [Bson],
    cursor: Option<Cursor>,
}

/// The fast path's plan, or `None` when the steps do not commute (two touch the
/// same top-level property) or one has no plain guard.
fn fast_plan(
    request: &PushdownRequest,
    compiled: &[CompiledStep],
    target: Version,
) -> Result<Option<FastPlan>> {
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
    // One group per (version, which steps would change the entity): each
    // expression is evaluated once per document.
    let mut key = doc! { "v": "$_v" };
    let mut guards = Vec::new();
    let mut update = Document::new();
    for (i, (c, step)) in compiled.iter().zip(&request.steps).enumerate() {
        let (Some((guard, Update::Ops(op))), Some(plain)) = (&c.change, plain_guard(step)) else {
            return Ok(None);
        };
        key.insert(format!("g{i}"), guard.clone());
        if !plain.is_empty() {
            guards.push(plain);
        }
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
    let set = update
        .entry("$set".to_owned())
        .or_insert_with(|| Bson::Document(Document::new()));
    if let Bson::Document(set) = set {
        set.insert(VERSION_FIELD, codec::version_to_bson(target)?);
    }
    Ok(Some(FastPlan {
        key,
        guards,
        update,
    }))
}

/// Adds the counted groups of the entities at `from` to `page`. Returns whether
/// every step changes every one of them, or `None` when some entity is part-way
/// through the steps (the general path handles it).
fn tally_groups(
    groups: &[Document],
    from: Version,
    target: Version,
    page: &mut PushdownPage,
) -> Result<Option<bool>> {
    let from = i128::from(from);
    let mut all_change = true;
    for g in groups {
        let n = crate::core::group_count(g.get("n"), "pushdown: counting the batch")?;
        let Ok(key) = g.get_document("_id") else {
            continue;
        };
        match group_version(key.get("v")) {
            Some(v) if v == from => {}
            // Entities part-way through the steps: the general path handles them.
            Some(v) if v > from && v < i128::from(target) => return Ok(None),
            _ => continue,
        }
        page.advanced += n;
        let mut any = false;
        for (i, changed) in page.changed.iter_mut().enumerate() {
            if key.get_bool(format!("g{i}")).unwrap_or(false) {
                *changed += n;
                any = true;
            } else {
                all_change = false;
            }
        }
        if any {
            page.changed_entities += n;
        }
    }
    Ok(Some(all_change))
}

impl MongoStore {
    /// The fast path: steps without conditions that touch distinct top-level
    /// properties commute, so an entity at `from` takes all of them in one
    /// update.
    ///
    /// Optimistically, one `update_many` of the batch's entities at `from` that
    /// every step changes: when it matches the whole batch, its matched count
    /// is every count (each step changed each entity) and the batch is done in
    /// one call. Otherwise (and for the next batch of the kind, until a batch
    /// shows every entity changing again) one aggregation counts the rest,
    /// grouped by version and by which steps change the entity, and one more
    /// `update_many` applies the steps to it.
    async fn pushdown_fast(&self, b: Batch<'_>) -> Result<Fast> {
        let Batch {
            request,
            compiled,
            target,
            ids,
            cursor,
        } = b;
        let Some(plan) = fast_plan(request, compiled, target)? else {
            return Ok(Fast::General { moved: 0 });
        };
        let batch = id_batch(ids);
        let at_from = at_version(request.from)?;
        let n_steps = compiled.len();
        let mut page = PushdownPage::empty(n_steps, cursor);
        let mut moved = 0;
        if !self.counts_first(&request.kind) {
            let mut filter = vec![batch.clone(), at_from.clone()];
            filter.extend(plan.guards);
            moved = self
                .fast_update(
                    request,
                    and(filter),
                    plan.update.clone(),
                    "pushdown: update_many (every step changes)",
                )
                .await?;
            if moved == ids.len() as u64 {
                page.advanced = moved;
                page.changed = vec![moved; n_steps];
                page.changed_entities = if n_steps > 0 { moved } else { 0 };
                return Ok(Fast::Done(page));
            }
            // Some entity of the batch is not changed by every step (or is not at
            // `from`): count the rest first, for this batch and the next ones.
            self.set_counts_first(&request.kind, true);
        }
        let groups = self.fast_groups(request, &batch, plan.key).await?;
        let Some(all_change) = tally_groups(&groups, request.from, target, &mut page)? else {
            return Ok(Fast::General { moved });
        };
        if moved == 0 && all_change {
            // Every entity of this batch takes every step: try the single update again.
            self.set_counts_first(&request.kind, false);
        }
        if page.advanced > 0 {
            self.fast_update(
                request,
                and(vec![batch, at_from]),
                plan.update,
                "pushdown: update_many",
            )
            .await?;
        }
        page.advanced += moved;
        page.changed_entities += moved;
        for c in &mut page.changed {
            *c += moved;
        }
        Ok(Fast::Done(page))
    }

    /// Runs the fast path's `update_many` of `filter`; returns how many it matched.
    async fn fast_update(
        &self,
        request: &PushdownRequest,
        filter: Document,
        update: Document,
        what: &'static str,
    ) -> Result<u64> {
        let started = Instant::now();
        let r = self
            .collection(&request.kind)
            .update_many(filter, update)
            .await
            .map_err(|e| self.pushdown_error(request, "pushdown: applying the steps", e))?;
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            moved = r.matched_count,
            "{what}"
        );
        Ok(r.matched_count)
    }

    /// The batch's entities counted by `key` (version, and which steps change them).
    async fn fast_groups(
        &self,
        request: &PushdownRequest,
        batch: &Document,
        key: Document,
    ) -> Result<Vec<Document>> {
        let pipeline = vec![
            doc! { "$match": batch.clone() },
            doc! { "$group": { "_id": key, "n": { "$sum": 1_i64 } } },
        ];
        let started = Instant::now();
        let what = "pushdown: counting the batch";
        let groups: Vec<Document> = self
            .collection(&request.kind)
            .aggregate(pipeline)
            .await
            .map_err(|e| self.pushdown_error(request, what, e))?
            .try_collect()
            .await
            .map_err(|e| self.pushdown_error(request, what, e))?;
        tracing::debug!(
            ms = started.elapsed().as_secs_f64() * 1e3,
            groups = groups.len(),
            "pushdown: counts"
        );
        Ok(groups)
    }

    /// A driver error of a pushdown step on the request's kind.
    fn pushdown_error(
        &self,
        request: &PushdownRequest,
        operation: &str,
        e: mongodb::error::Error,
    ) -> Error {
        crate::core::driver_error(operation, e)
            .with_context("store", self.location.clone())
            .with_context("kind", request.kind.clone())
    }

    /// Whether the fast path of `kind` counts a batch before updating it (the
    /// last batch had entities that not every step changes).
    fn counts_first(&self, kind: &str) -> bool {
        self.counts_first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(kind)
    }

    fn set_counts_first(&self, kind: &str, on: bool) {
        let mut kinds = self.counts_first.lock().unwrap_or_else(|p| p.into_inner());
        if on {
            kinds.insert(kind.to_owned());
        } else {
            kinds.remove(kind);
        }
    }

    /// See [`tern_core::store::Store::update_in_place`].
    pub(crate) async fn pushdown(&self, request: PushdownRequest) -> Result<PushdownPage> {
        self.pushdown_in(request, Document::new()).await
    }

    /// [`Self::pushdown`] over the documents `range` matches (an `_id`
    /// range: a partition; empty: all).
    pub(crate) async fn pushdown_in(
        &self,
        request: PushdownRequest,
        range: Document,
    ) -> Result<PushdownPage> {
        let target = pushdown::target_version(&request)?;
        // Compile first: an unsupported step is refused before anything is written.
        let compiled = request
            .steps
            .iter()
            .map(compile)
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.with_context("kind", request.kind.clone()))?;
        let limit = request.limit.clamp(1, 100_000);
        let ids = self
            .batch_ids(
                &request.kind,
                range,
                request.cursor.as_ref(),
                limit,
                "pushdown: reading the batch's ids",
            )
            .await?;
        let cursor = if ids.len() >= limit {
            ids.last().map(encode_cursor)
        } else {
            None
        };
        if ids.is_empty() {
            return Ok(PushdownPage::empty(request.steps.len(), cursor));
        }
        let batch = |cursor| Batch {
            request: &request,
            compiled: &compiled,
            target,
            ids: &ids,
            cursor,
        };
        let moved = match self.pushdown_fast(batch(cursor.clone())).await? {
            Fast::Done(page) => return Ok(page),
            Fast::General { moved } => moved,
        };
        let page = self.pushdown_general(batch(cursor)).await?;
        Ok(PushdownPage {
            advanced: page.advanced + moved,
            changed: page.changed.iter().map(|c| c + moved).collect(),
            changed_entities: page.changed_entities + moved,
            cursor: page.cursor,
        })
    }

    /// The general path: each step as two `update_many` calls on the batch.
    async fn pushdown_general(&self, b: Batch<'_>) -> Result<PushdownPage> {
        let (request, compiled) = (b.request, b.compiled);
        let (target, ids, cursor) = (b.target, b.ids, b.cursor);
        let coll = self.collection(&request.kind);
        let ctx = |op: &str, e: mongodb::error::Error| {
            crate::core::driver_error(op, e)
                .with_context("store", self.location.clone())
                .with_context("kind", request.kind.clone())
        };

        let mut page = PushdownPage::empty(request.steps.len(), cursor);
        let in_batch = id_batch(ids);

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
                // `$expr` inside `$and`, not next to `_id` (see `writes::replace_filter`).
                let filter = and(vec![
                    in_batch.clone(),
                    at_version(v)?,
                    doc! { "$expr": expr.clone() },
                ]);
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
                let r = match update.clone() {
                    Update::Ops(mut update) => {
                        match update.get_document_mut("$set") {
                            Ok(set) => {
                                set.insert(VERSION_FIELD, next.clone());
                            }
                            Err(_) => {
                                update.insert("$set", doc! { VERSION_FIELD: next.clone() });
                            }
                        }
                        coll.update_many(filter, update).await
                    }
                    Update::Pipeline(mut stages) => {
                        stages.push(doc! { "$set": { VERSION_FIELD: next.clone() } });
                        coll.update_many(filter, stages).await
                    }
                }
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
