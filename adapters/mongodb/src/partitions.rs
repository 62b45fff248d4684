//! Partitions of a kind ([`Partitions`]): `_id` ranges of its collection,
//! split at ids drawn by `$sample` and sorted (the split MongoDB's Spark
//! connector calls "sample"), the first range open below, the last open
//! above. A document's partition is decided by its `_id` alone, for good:
//! no topology change moves it (on a sharded cluster the bounds stay logical
//! when chunks move). Inside a partition, pages are the store's scan (and
//! pushdown) pages with the range added to the query, resumed by the last
//! `_id` as every scan of this store is.

use async_trait::async_trait;
use futures::TryStreamExt;
use mongodb::bson::{Bson, Document, doc};
use tern_core::store::{
    Error, ErrorKind, Partition, Partitions, PushdownPage, PushdownRequest, Result, ScanPage,
    ScanRequest,
};

use crate::core::{MongoStore, TYPE_CLASSES, and, type_class};

/// Ids sampled per partition asked for: the bounds are every `SAMPLES`-th.
const SAMPLES: usize = 10;

/// The `_id` range `[lo, hi)` in MongoDB's order, `None` an open end.
#[derive(Debug, Clone, PartialEq)]
struct Range {
    lo: Option<Bson>,
    hi: Option<Bson>,
}

impl Range {
    fn partition(&self) -> Partition {
        let show = |b: &Option<Bson>| match b {
            Some(b) => b.clone().into_relaxed_extjson().to_string(),
            None => "…".to_owned(),
        };
        let mut d = Document::new();
        if let Some(lo) = &self.lo {
            d.insert("lo", lo.clone());
        }
        if let Some(hi) = &self.hi {
            d.insert("hi", hi.clone());
        }
        Partition {
            label: format!("_id [{}, {})", show(&self.lo), show(&self.hi)),
            spec: Bson::Document(d).into_canonical_extjson().to_string(),
        }
    }

    fn parse(partition: &Partition) -> Result<Range> {
        let invalid = || {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("{:?} is not a MongoDB partition", partition.spec),
            )
        };
        let json: serde_json::Value =
            serde_json::from_str(&partition.spec).map_err(|e| invalid().with_source(e))?;
        match Bson::try_from(json) {
            Ok(Bson::Document(mut d)) => Ok(Range {
                lo: d.remove("lo"),
                hi: d.remove("hi"),
            }),
            _ => Err(invalid()),
        }
    }

    /// The query of the range. `$gte`/`$lt` compare within one BSON type
    /// class only, so the ids of the classes wholly inside are named by `$type`.
    fn query(&self) -> Document {
        let mut parts = Vec::new();
        if let Some(lo) = &self.lo {
            parts.push(with_classes(
                doc! { "_id": { "$gte": lo.clone() } },
                TYPE_CLASSES.iter().skip(type_class(lo) + 1),
            ));
        }
        if let Some(hi) = &self.hi {
            parts.push(with_classes(
                doc! { "_id": { "$lt": hi.clone() } },
                TYPE_CLASSES.iter().take(type_class(hi)),
            ));
        }
        and(parts)
    }
}

/// `query`, or an `_id` of one of `classes`.
fn with_classes<'a>(query: Document, classes: impl Iterator<Item = &'a &'a [&'a str]>) -> Document {
    let names: Vec<Bson> = classes
        .flat_map(|c| c.iter().map(|t| Bson::String((*t).to_owned())))
        .collect();
    if names.is_empty() {
        query
    } else {
        doc! { "$or": [query, { "_id": { "$type": names } }] }
    }
}

/// `count` ranges cut at evenly spaced ids of `sample` (sorted, distinct):
/// fewer when the sample has fewer distinct ids.
fn cut(sample: &[Bson], count: usize) -> Vec<Range> {
    let mut bounds: Vec<Bson> = Vec::new();
    for i in 1..count {
        if let Some(b) = sample.get(i * sample.len() / count)
            && bounds.last() != Some(b)
            && Some(b) != sample.first()
        {
            bounds.push(b.clone());
        }
    }
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut lo = None;
    for b in bounds {
        out.push(Range {
            lo: lo.take(),
            hi: Some(b.clone()),
        });
        lo = Some(b);
    }
    out.push(Range { lo, hi: None });
    out
}

#[async_trait]
impl Partitions for MongoStore {
    async fn split(&self, kind: &str, count: usize) -> Result<Vec<Partition>> {
        let count = count.max(1);
        if count == 1 {
            return Ok(vec![Range { lo: None, hi: None }.partition()]);
        }
        let size = i64::try_from(count * SAMPLES).unwrap_or(i64::MAX);
        let failed = |e| {
            self.err("splitting a kind: sampling ids", e)
                .with_context("kind", kind.to_owned())
        };
        let docs: Vec<Document> = self
            .collection(kind)
            .aggregate(vec![
                doc! { "$sample": { "size": size } },
                doc! { "$project": { "_id": 1 } },
                doc! { "$sort": { "_id": 1 } },
            ])
            .await
            .map_err(failed)?
            .try_collect()
            .await
            .map_err(failed)?;
        let mut ids: Vec<Bson> = docs
            .into_iter()
            .filter_map(|mut d| d.remove("_id"))
            .collect();
        // `$sample` may repeat a document.
        ids.dedup();
        // A kind smaller than the sample: a partition per `SAMPLES` documents at most.
        let count = count.min(ids.len() / SAMPLES).max(1);
        Ok(cut(&ids, count).iter().map(Range::partition).collect())
    }

    async fn scan_partition(
        &self,
        kind: &str,
        partition: &Partition,
        request: ScanRequest,
    ) -> Result<ScanPage> {
        let range = Range::parse(partition)?;
        self.scan_in(kind, request, Some(range.query())).await
    }

    async fn update_partition(
        &self,
        partition: &Partition,
        request: PushdownRequest,
    ) -> Result<PushdownPage> {
        let range = Range::parse(partition)?;
        self.pushdown_in(request, range.query()).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cuts_are_disjoint_and_open_at_both_ends() {
        let sample: Vec<Bson> = (0..40).map(Bson::Int32).collect();
        let ranges = cut(&sample, 4);
        assert_eq!(ranges.len(), 4);
        assert_eq!(ranges[0].lo, None);
        assert_eq!(ranges[3].hi, None);
        for w in ranges.windows(2) {
            assert_eq!(w[0].hi, w[1].lo);
        }
        // A sample of one id: one range, open at both ends.
        assert_eq!(
            cut(&[Bson::Int32(1)], 8),
            vec![Range { lo: None, hi: None }]
        );
    }

    #[test]
    fn specs_round_trip_with_their_types() {
        let range = Range {
            lo: Some(Bson::Int64(5)),
            hi: Some(Bson::String("k".into())),
        };
        assert_eq!(Range::parse(&range.partition()).unwrap(), range);
    }

    #[test]
    fn a_range_across_type_classes_names_the_classes_between() {
        let range = Range {
            lo: Some(Bson::Int64(5)),
            hi: Some(Bson::String("k".into())),
        };
        let q = range.query().to_string();
        // Numbers from 5, strings below "k"; nothing of the classes after strings.
        assert!(q.contains("$gte") && q.contains("$lt"), "{q}");
        assert!(q.contains("objectId"), "{q}");
        assert!(q.contains("null"), "{q}");
    }
}
