//! Driver calls shared by the store: error mapping and filters.

use mongodb::bson::{Bson, Document, doc};
use mongodb::error::{ErrorKind as DriverKind, WriteFailure};
use tern_core::store::{Error, ErrorKind, VersionFilter};

use crate::codec::VERSION_FIELD;

/// The MongoDB error code of a duplicate key.
pub(crate) const DUPLICATE_KEY: i32 = 11000;

/// Maps a driver error to a store error: `operation` names the step, the
/// driver's text (see [`driver_text`]) is the cause, and connection trouble is
/// temporary.
pub(crate) fn map_mongo_error(operation: &str, e: mongodb::error::Error) -> Error {
    let text = driver_text(&e);
    map_with_text(operation, &e, text)
}

/// [`map_mongo_error`] for the errors of connecting to `url`: the driver's
/// text with the URL's password masked (a connection string error may quote it).
pub(crate) fn map_connect_error(operation: &str, e: mongodb::error::Error, url: &str) -> Error {
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
const TYPE_CLASSES: &[&[&str]] = &[
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

fn type_class(b: &Bson) -> usize {
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
