//! Partitions of a kind ([`Partitions`]): ranges of the Murmur3 token ring,
//! `token(pk) > lo AND token(pk) <= hi`, the ring `(-2^63, 2^63 - 1]` cut
//! into `count` equal ranges (what DSBulk and the Spark connector do inside
//! each range of the ring, by ring fraction). A row's partition is decided by
//! its partition key alone (its token), whatever the ring's owners do
//! meanwhile. Inside a range, pages are the store's scan pages ([`ScanCursor`](crate::cursor::ScanCursor):
//! the driver's paging state, and the token of the last row to continue from
//! when a node refuses it) over the range's queries.

use async_trait::async_trait;
use tern_core::store::{
    Error, Partition, Partitions, PushdownPage, PushdownRequest, Result, ScanPage, ScanRequest,
};

use crate::core::{CassStore, Retry, rows_of};
use crate::token_range::{TokenRange, cut};

/// The partitioner whose tokens these ranges are.
const MURMUR3: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

impl CassStore {
    /// Whether the cluster's tokens are Murmur3's and token ranges can be queried.
    async fn murmur3_ring(&self) -> Result<bool> {
        if !self.token_ranges {
            return Ok(false);
        }
        let result = self
            .core
            .execute(
                "SELECT partitioner FROM system.local",
                (),
                Retry::Idempotent,
                "reading the cluster's partitioner",
            )
            .await?;
        let rows: Vec<(Option<String>,)> = rows_of(result, "reading the cluster's partitioner")?;
        Ok(rows
            .first()
            .and_then(|r| r.0.as_deref())
            .is_some_and(|p| p == MURMUR3))
    }
}

#[async_trait]
impl Partitions for CassStore {
    async fn split(&self, kind: &str, count: usize) -> Result<Vec<Partition>> {
        let _ = kind;
        let count = if self.murmur3_ring().await? { count } else { 1 };
        Ok(cut(count).into_iter().map(TokenRange::partition).collect())
    }

    async fn scan_partition(
        &self,
        kind: &str,
        partition: &Partition,
        request: ScanRequest,
    ) -> Result<ScanPage> {
        self.scan_kind(kind, Some(TokenRange::parse(partition)?), &request)
            .await
    }

    async fn update_partition(
        &self,
        partition: &Partition,
        request: PushdownRequest,
    ) -> Result<PushdownPage> {
        let _ = (partition, request);
        Err(Error::unsupported("cassandra", "update_partition"))
    }
}
