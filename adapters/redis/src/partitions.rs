//! Partitions of a kind ([`Partitions`]): ranges of the SCAN cursor space on
//! one server, each master's slots (cut the same way) on a cluster. Why a
//! range of reversed SCAN cursors is a set of keys decided by the key alone
//! is in the crate docs ("Partitions").
//!
//! A partition's spec (JSON): the slots it covers on a cluster (none on one
//! server), `bits` (the cursor space is cut into `2^bits` units) and the
//! units `[from, to)`. Its cursor (JSON): the node being scanned, that node's
//! `run_id` (a restarted server hashes keys with a new seed), a fingerprint
//! of the owners of the partition's slots, and the SCAN position on the node.
//! A page whose node restarted, or whose slots moved, answers `InvalidCursor`
//! and the engine scans the partition again from its start.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tern_core::store::{
    Cursor, Error, ErrorKind, Partition, Partitions, PushdownPage, PushdownRequest, Result,
    ScanPage, ScanRequest,
};
use tracing::Instrument;

use crate::core::{MAX_KEYS_PER_SCRIPT, RedisStore, SCAN_COUNT, SCAN_STEPS_PER_PAGE, scan_count};
use crate::scanpos::ScanPos;
use crate::topology::{Node, SlotMap, key_slot, parse_slot_map};

/// Cursor-space units per asked partition (`2^3`): ranges of whole units come
/// out within 1/8 of one another in size.
const EXTRA_BITS: u32 = 3;

/// A range of units holds keys decided by the key alone while the server's
/// main table has at least as many buckets as there are units: Redis never
/// shrinks the table below the number of keys, so `2^bits` is kept at most an
/// eighth of the keys at the split (the database may lose 7/8 of its keys
/// during the stage before boundaries can blur).
const KEYS_PER_UNIT: u64 = 8;

/// A partition's spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Spec {
    /// The slot ranges (inclusive) on a cluster; empty on one server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    slots: Vec<(u16, u16)>,
    /// The cursor space is cut into `2^bits` units (0: one unit, a whole SCAN).
    bits: u32,
    /// The first unit.
    from: u64,
    /// The unit after the last.
    to: u64,
}

impl Spec {
    fn parse(partition: &Partition) -> Result<Spec> {
        let spec: Spec = serde_json::from_str(&partition.spec).map_err(|e| {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("{:?} is not a Redis partition", partition.spec),
            )
            .with_source(e)
        })?;
        if spec.bits > 32 || spec.from >= spec.to || spec.to > 1u64 << spec.bits {
            return Err(Error::new(
                ErrorKind::InvalidCursor,
                format!("{:?} is not a Redis partition", partition.spec),
            ));
        }
        Ok(spec)
    }

    fn partition(&self, node: Option<&Node>) -> Partition {
        let units = 1u64 << self.bits;
        let mut label = String::new();
        if !self.slots.is_empty() {
            let slots: Vec<String> = self
                .slots
                .iter()
                .map(|(lo, hi)| format!("{lo}-{hi}"))
                .collect();
            label.push_str(&format!("slots {}", slots.join(",")));
            if let Some(n) = node {
                label.push_str(&format!(" @ {}:{}", n.host, n.port));
            }
        }
        if units > 1 {
            if !label.is_empty() {
                label.push_str(", ");
            }
            label.push_str(&format!(
                "hash buckets {}..{} of {units}",
                self.from, self.to
            ));
        }
        if label.is_empty() {
            label.push_str("every key");
        }
        Partition {
            label,
            spec: serde_json::to_string(self).unwrap_or_default(),
        }
    }

    /// Whether `slot` is the partition's (always, on one server).
    fn has_slot(&self, slot: u16) -> bool {
        self.slots.is_empty()
            || self
                .slots
                .iter()
                .any(|(lo, hi)| (*lo..=*hi).contains(&slot))
    }

    /// The SCAN cursor where the range starts.
    fn start(&self) -> u64 {
        reverse(self.from, self.bits)
    }

    /// Where a SCAN step that answered `next` ended, against the range: the
    /// keys it visited end at the reversed cursor of `next` (the end of the
    /// cursor space when `next` is `0`, the iteration wrapped).
    fn reached(&self, next: u64) -> Reached {
        if next == 0 {
            return if self.is_last() {
                Reached::End
            } else {
                Reached::Past
            };
        }
        let unit = reverse(next & ((1u64 << self.bits) - 1), self.bits);
        if unit < self.to {
            Reached::Before
        } else if unit == self.to && next >> self.bits == 0 {
            Reached::End
        } else {
            Reached::Past
        }
    }

    /// Where the range ends in the iteration, out of `2^64` (see [`place`]).
    fn end_place(&self) -> u128 {
        u128::from(self.to) << (64 - self.bits)
    }

    /// Whether the range ends where the iteration does.
    fn is_last(&self) -> bool {
        self.to == 1u64 << self.bits
    }
}

/// Where SCAN cursor `cursor` stands in the iteration, out of `2^64`: the
/// reversed cursor (Redis visits buckets in reverse-binary order).
fn place(cursor: u64) -> u128 {
    u128::from(cursor.reverse_bits())
}

/// Where a SCAN step that answered `next` ended: [`place`], or the end of the
/// iteration (`2^64`) when `next` is `0`.
fn place_after(next: u64) -> u128 {
    if next == 0 { 1u128 << 64 } else { place(next) }
}

/// `num / den`, rounded up, at least 1 and at most [`SCAN_COUNT`] (a COUNT).
fn share(num: u128, den: u128) -> usize {
    if den == 0 {
        return SCAN_COUNT;
    }
    usize::try_from(num.div_ceil(den)).map_or(SCAN_COUNT, |n| n.clamp(1, SCAN_COUNT))
}

/// What one page of a partition scans: a node (none on one server), the
/// partition's range, the kind's key pattern and Redis type.
#[derive(Clone, Copy)]
struct Range<'a> {
    node: Option<&'a Node>,
    spec: &'a Spec,
    pattern: &'a str,
    type_name: Option<&'a str>,
}

/// Where a SCAN step ended, against a partition's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reached {
    /// Inside the range: continue.
    Before,
    /// Exactly at its end: the step's keys are the range's, and the range is done.
    End,
    /// Beyond its end: the step visited buckets of the next range too.
    Past,
}

/// The partitions of every master in claim order: the first of each master,
/// then the second of each, and so on, so that workers claiming one after
/// another spread over the masters instead of queueing on one of them.
fn interleave<T>(per_master: Vec<Vec<T>>) -> Vec<T> {
    let mut queues: Vec<std::vec::IntoIter<T>> =
        per_master.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        out.extend(queues.iter_mut().filter_map(Iterator::next));
        if out.len() == before {
            return out;
        }
    }
}

/// The low `bits` bits of `v` in reverse order: the unit of a SCAN cursor
/// (the top `bits` bits of the 64-bit reversed cursor), and back.
fn reverse(v: u64, bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        v.reverse_bits() >> (64 - bits)
    }
}

/// How many bits of units for `parts` partitions of a database of `keys`
/// keys: enough for ranges of even size, never more units than
/// `keys / KEYS_PER_UNIT` (0: one partition).
fn bits_for(parts: usize, keys: u64) -> u32 {
    if parts <= 1 {
        return 0;
    }
    let want = (parts as u64).next_power_of_two().trailing_zeros() + EXTRA_BITS;
    let cap = match keys / KEYS_PER_UNIT {
        0 => 0,
        n => 63 - n.leading_zeros(),
    };
    want.min(cap)
}

/// `parts` ranges of whole units (fewer when there are fewer units), as even as can be.
fn ranges(parts: usize, bits: u32) -> Vec<(u64, u64)> {
    let units = 1u64 << bits;
    let parts = (parts as u64).clamp(1, units);
    (0..parts)
        .map(|i| (units * i / parts, units * (i + 1) / parts))
        .filter(|(a, b)| a < b)
        .collect()
}

/// The masters serving any slot of `spec`, in address order, and a
/// fingerprint of who serves which of its slots.
fn owners(map: &SlotMap, spec: &Spec) -> (Vec<Node>, String) {
    let mut nodes = Vec::new();
    let mut print = String::new();
    for (node, ranges) in map {
        let mut mine = false;
        for (lo, hi) in ranges {
            for (a, b) in &spec.slots {
                let (x, y) = ((*lo).max(*a), (*hi).min(*b));
                if x <= y {
                    mine = true;
                    print.push_str(&format!("{x}-{y}@{}:{};", node.host, node.port));
                }
            }
        }
        if mine {
            nodes.push(node.clone());
        }
    }
    (nodes, format!("{:016x}", fnv(print.as_bytes())))
}

/// FNV-1a, 64 bits.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where the scan of a partition stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PartCursor {
    /// The node scanned (`host:port`; empty on one server).
    node: String,
    /// Its `run_id` when the scan of the node began.
    run: String,
    /// The fingerprint of the owners of the partition's slots (cluster).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    owners: String,
    /// The SCAN position on the node ([`ScanPos`] text).
    pos: String,
}

impl PartCursor {
    fn parse(cursor: &Cursor) -> Result<PartCursor> {
        serde_json::from_str(&cursor.0).map_err(|e| {
            Error::new(
                ErrorKind::InvalidCursor,
                format!("cursor {:?} is not a Redis partition position", cursor.0),
            )
            .with_source(e)
        })
    }

    fn to_cursor(&self) -> Cursor {
        Cursor(serde_json::to_string(self).unwrap_or_default())
    }
}

fn node_name(node: Option<&Node>) -> String {
    node.map(|n| format!("{}:{}", n.host, n.port))
        .unwrap_or_default()
}

/// What `INFO server` says about a server: its run id, and whether its
/// SCAN cursors are Redis's reverse-binary bucket indexes of one table
/// (Redis; on a cluster only before the per-slot tables of Redis 7.4).
struct ServerInfo {
    run_id: String,
    buckets: bool,
}

fn parse_info(text: &str, cluster: bool) -> ServerInfo {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let other = field("valkey_version").is_some()
        || field("dragonfly_version").is_some()
        || field("server_name").is_some_and(|n| n != "redis");
    let version: Vec<u32> = field("redis_version")
        .unwrap_or("")
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    let per_slot_tables = version.as_slice() >= [7, 3].as_slice();
    ServerInfo {
        run_id: field("run_id").unwrap_or("").to_owned(),
        buckets: !(other || version.is_empty() || (cluster && per_slot_tables)),
    }
}

impl RedisStore {
    async fn server_info(&self, node: Option<&Node>) -> Result<ServerInfo> {
        let mut cmd = redis::cmd("INFO");
        cmd.arg("server");
        let text: String = self
            .conn()
            .on_node(node, cmd)
            .await
            .map_err(|e| self.err("reading the server's INFO", e))?;
        Ok(parse_info(&text, node.is_some()))
    }

    async fn db_size(&self, node: Option<&Node>) -> Result<u64> {
        self.conn()
            .on_node(node, redis::cmd("DBSIZE"))
            .await
            .map_err(|e| self.err("counting the database's keys", e))
    }

    async fn slot_map(&self) -> Result<SlotMap> {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("NODES");
        let text: String = self
            .conn()
            .on_node(None, cmd)
            .await
            .map_err(|e| self.err("reading the cluster's slots", e))?;
        Ok(parse_slot_map(&text))
    }

    /// The units of `parts` partitions of one node's keys (`bits` 0 where its
    /// SCAN cursors are not bucket indexes, or too few keys).
    async fn node_bits(&self, node: Option<&Node>, parts: usize) -> Result<u32> {
        if parts <= 1 {
            return Ok(0);
        }
        let (info, keys) = futures::try_join!(self.server_info(node), self.db_size(node))?;
        Ok(if info.buckets {
            bits_for(parts, keys)
        } else {
            0
        })
    }

    /// One page of the keys of `pattern` in `spec`'s range on one node, from
    /// `pos`: [`RedisStore::scan_node_page`]'s loop, stopped at the range's
    /// end. A step asks what the unpartitioned scan asks ([`scan_count`]: up
    /// to [`SCAN_COUNT`] in a database where the kind is a small share of the
    /// keys), and no more than about 4/5 of the keys estimated to be left in
    /// the range (from how far the page's steps so far moved the reversed
    /// cursor per key asked). A SCAN step that passed the end is repeated with
    /// a smaller COUNT (its own estimate of the keys left, at most half its
    /// COUNT) until one step of COUNT 1 passes it: that step returned the keys
    /// of a single bucket (it stops at the first bucket holding a key), at or
    /// past the end, so nothing of the range is left.
    async fn range_page(
        &self,
        range: &Range<'_>,
        pos: &mut ScanPos,
        limit: usize,
    ) -> Result<Vec<String>> {
        let Range {
            node,
            spec,
            pattern,
            type_name,
        } = *range;
        let mut out = std::mem::take(&mut pos.pending);
        let mut steps = 0;
        let (mut asked, mut found) = (0, 0);
        // How far the accepted steps moved (out of 2^64) for the COUNT they asked.
        let (mut walked, mut walked_asked) = (0u128, 0u128);
        // The most a step asks: lowered by every step that passed the end.
        let mut most = SCAN_COUNT;
        let end = spec.end_place();
        while out.len() < limit && !pos.done && steps < SCAN_STEPS_PER_PAGE * 2 {
            let room = limit - out.len();
            let left = end.saturating_sub(place(pos.cursor));
            let mut ask = scan_count(room, asked, found).min(most);
            if walked > 0 {
                ask = ask.min(share(left * walked_asked * 4 / 5, walked));
            }
            let (next, keys) = self
                .scan_keys(node, pos.cursor, pattern, ask, type_name)
                .await?;
            steps += 1;
            let reached = spec.reached(next);
            let moved = place_after(next).saturating_sub(place(pos.cursor));
            if reached == Reached::Past {
                if ask > 1 {
                    // The keys left, estimated from this step's own stride.
                    most = share(left * ask as u128, moved).min(ask / 2);
                    continue;
                }
                pos.done = true;
                break;
            }
            asked += ask;
            found += keys.len();
            walked += moved;
            walked_asked += ask as u128;
            out.extend(keys);
            pos.cursor = next;
            pos.done = reached == Reached::End;
        }
        if out.len() > limit {
            pos.pending = out.split_off(limit);
        }
        Ok(out)
    }

    /// [`RedisStore::range_page`] on `node`, with the node's `INFO` (its run
    /// id) read in the same round trip.
    async fn node_page(
        &self,
        range: &Range<'_>,
        pos: &mut ScanPos,
        limit: usize,
    ) -> Result<(ServerInfo, Vec<String>)> {
        futures::try_join!(
            self.server_info(range.node)
                .instrument(tracing::debug_span!("node_info")),
            self.range_page(range, pos, limit)
        )
    }

    /// The masters of the cluster's slot map that serve `spec`'s slots and
    /// their fingerprint (on one server: the server, no fingerprint).
    async fn owners_of(&self, spec: &Spec) -> Result<(Vec<Option<Node>>, String)> {
        if self.nodes.is_empty() {
            return Ok((vec![None], String::new()));
        }
        let map = self
            .slot_map()
            .instrument(tracing::debug_span!("slot_map"))
            .await?;
        let (owners, print) = owners(&map, spec);
        Ok((owners.into_iter().map(Some).collect(), print))
    }

    /// One page of the keys of `kind` in `partition`, and where to continue.
    ///
    /// Continuing on a cluster, the slot map is read in the same round trip
    /// as the page's first SCAN step (not before it): the page is scanned on
    /// the cursor's master and kept only if the map still gives the
    /// partition's slots to the owners the cursor recorded.
    async fn partition_keys(
        &self,
        kind: &str,
        partition: &Partition,
        cursor: Option<&Cursor>,
        limit: usize,
        type_name: Option<&str>,
    ) -> Result<(Vec<String>, Option<Cursor>)> {
        self.keys.check_kind(kind)?;
        let spec = Spec::parse(partition)?;
        let pattern = self.keys.kind_pattern(kind);
        let limit = limit.max(1);
        let changed = |what: &str| {
            Error::new(
                ErrorKind::InvalidCursor,
                format!(
                    "the partition {} cannot continue: {what}; scan it again from its start",
                    partition.label
                ),
            )
        };
        let cursor = cursor.map(PartCursor::parse).transpose()?;
        let fresh = |spec: &Spec| ScanPos {
            cursor: spec.start(),
            ..ScanPos::default()
        };
        // Continuing: the cursor's node is scanned while the slot map is read.
        let (nodes, print, mut i, mut pos, mut first) = match cursor {
            None => {
                let (nodes, print) = self.owners_of(&spec).await?;
                (nodes, print, 0, fresh(&spec), None)
            }
            Some(c) => {
                let (run, mut pos) = if c.pos.is_empty() {
                    (None, fresh(&spec))
                } else {
                    (Some(c.run), ScanPos::parse(Some(&Cursor(c.pos)))?)
                };
                let node = match c.node.rsplit_once(':') {
                    None => None,
                    Some((host, port)) => Some(Node {
                        host: host.to_owned(),
                        port: port.parse().map_err(|_| changed("its master is gone"))?,
                    }),
                };
                let range = Range {
                    node: node.as_ref(),
                    spec: &spec,
                    pattern: &pattern,
                    type_name,
                };
                let ((nodes, print), page) = futures::try_join!(
                    self.owners_of(&spec),
                    self.node_page(&range, &mut pos, limit)
                )?;
                if c.owners != print {
                    return Err(changed("its slots moved to other masters"));
                }
                let i = nodes
                    .iter()
                    .position(|n| node_name(n.as_ref()) == c.node)
                    .ok_or_else(|| changed("its master is gone"))?;
                (nodes, print, i, pos, Some((run, page)))
            }
        };
        let mut out = Vec::new();
        while i < nodes.len() {
            let node = nodes[i].as_ref();
            let (run, (info, keys)) = match first.take() {
                Some(page) => page,
                None => {
                    let room = limit - out.len();
                    let range = Range {
                        node,
                        spec: &spec,
                        pattern: &pattern,
                        type_name,
                    };
                    let page = self.node_page(&range, &mut pos, room).await?;
                    (None, page)
                }
            };
            if run.is_some_and(|r| r != info.run_id) {
                return Err(changed(
                    "the server restarted (a new run_id hashes keys anew)",
                ));
            }
            out.extend(keys.into_iter().filter(|k| {
                self.keys.owns(kind, k)
                    && (spec.slots.is_empty() || spec.has_slot(key_slot(k.as_bytes())))
            }));
            if let Some(pos) = pos.to_cursor() {
                let next = PartCursor {
                    node: node_name(node),
                    run: info.run_id,
                    owners: print.clone(),
                    pos: pos.0,
                };
                return Ok((out, Some(next.to_cursor())));
            }
            i += 1;
            pos = fresh(&spec);
            if out.len() >= limit && i < nodes.len() {
                // The next node from its start: an empty position there.
                let next = PartCursor {
                    node: node_name(nodes[i].as_ref()),
                    run: String::new(),
                    owners: print.clone(),
                    pos: String::new(),
                };
                return Ok((out, Some(next.to_cursor())));
            }
        }
        Ok((out, None))
    }
}

#[async_trait]
impl Partitions for RedisStore {
    async fn split(&self, kind: &str, count: usize) -> Result<Vec<Partition>> {
        self.keys.check_kind(kind)?;
        let count = count.max(1);
        if self.nodes.is_empty() {
            let bits = self.node_bits(None, count).await?;
            return Ok(ranges(count, bits)
                .into_iter()
                .map(|(from, to)| {
                    Spec {
                        slots: Vec::new(),
                        bits,
                        from,
                        to,
                    }
                    .partition(None)
                })
                .collect());
        }
        let map: SlotMap = self
            .slot_map()
            .await?
            .into_iter()
            .filter(|(_, slots)| !slots.is_empty())
            .collect();
        if map.is_empty() {
            return Err(Error::new(
                ErrorKind::Unavailable,
                "the Redis cluster has no master serving slots",
            )
            .set_temporary());
        }
        let mut out = Vec::new();
        if count < map.len() {
            // Fewer partitions than masters: consecutive masters together.
            for g in 0..count {
                let group = &map[map.len() * g / count..map.len() * (g + 1) / count];
                let slots = group.iter().flat_map(|(_, s)| s.iter().copied()).collect();
                out.push(
                    Spec {
                        slots,
                        bits: 0,
                        from: 0,
                        to: 1,
                    }
                    .partition(None),
                );
            }
            return Ok(out);
        }
        // Each master its share of the partitions, its keys cut by hash bucket.
        let mut per_master = Vec::with_capacity(map.len());
        for (m, (node, slots)) in map.iter().enumerate() {
            let share = count / map.len() + usize::from(m < count % map.len());
            let bits = self.node_bits(Some(node), share).await?;
            let parts: Vec<Partition> = ranges(share, bits)
                .into_iter()
                .map(|(from, to)| {
                    Spec {
                        slots: slots.clone(),
                        bits,
                        from,
                        to,
                    }
                    .partition(Some(node))
                })
                .collect();
            per_master.push(parts);
        }
        Ok(interleave(per_master))
    }

    async fn scan_partition(
        &self,
        kind: &str,
        partition: &Partition,
        request: ScanRequest,
    ) -> Result<ScanPage> {
        let (keys, cursor) = self
            .partition_keys(
                kind,
                partition,
                request.cursor.as_ref(),
                request.limit,
                Some(self.type_name(kind)),
            )
            .instrument(tracing::debug_span!("page_keys"))
            .await?;
        let mut entities = self
            .fetch(kind, &keys)
            .instrument(tracing::debug_span!("fetch"))
            .await?;
        entities.retain(|e| request.filter.matches(e));
        Ok(ScanPage { entities, cursor })
    }

    async fn update_partition(
        &self,
        partition: &Partition,
        request: PushdownRequest,
    ) -> Result<PushdownPage> {
        if tern_core::store::Store::features(self).pushdown.is_none() {
            return Err(Error::unsupported(
                crate::config::REDIS_SCHEME,
                "update_partition",
            ));
        }
        let limit = request.limit.clamp(1, MAX_KEYS_PER_SCRIPT);
        let (keys, cursor) = self
            .partition_keys(
                &request.kind,
                partition,
                request.cursor.as_ref(),
                limit,
                Some("hash"),
            )
            .await?;
        self.pushdown_keys(&request, &keys, cursor).await
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::topology::SLOTS;

    #[test]
    fn partitions_alternate_between_masters_in_claim_order() {
        let per_master = vec![vec!["a0", "a1", "a2"], vec!["b0", "b1"], vec!["c0", "c1"]];
        assert_eq!(
            interleave(per_master),
            ["a0", "b0", "c0", "a1", "b1", "c1", "a2"]
        );
        assert!(interleave(Vec::<Vec<u8>>::new()).is_empty());
    }

    #[test]
    fn key_slots_are_redis_cluster_slots() {
        // CLUSTER KEYSLOT answers, from the Redis Cluster specification.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 0x31C3 % SLOTS);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    #[test]
    fn ranges_are_disjoint_and_cover_the_units() {
        for bits in 0..8 {
            for parts in 1..=20 {
                let r = ranges(parts, bits);
                assert!(!r.is_empty() && r.len() <= parts);
                assert_eq!(r[0].0, 0);
                assert_eq!(r.last().unwrap().1, 1 << bits);
                for w in r.windows(2) {
                    assert_eq!(w[0].1, w[1].0);
                }
            }
        }
    }

    #[test]
    fn bits_follow_parts_and_keys() {
        assert_eq!(bits_for(1, 1_000_000), 0);
        assert_eq!(bits_for(4, 1_000_000), 5);
        assert_eq!(bits_for(16, 1_000_000), 7);
        // A small database: fewer units, never more than keys / 8.
        assert_eq!(bits_for(16, 100), 3);
        assert_eq!(bits_for(16, 7), 0);
    }

    #[test]
    fn the_range_ends_where_the_reversed_cursor_reaches_it() {
        // 4 units: cursors visit buckets 0, 2, 1, 3 (reversed 0, 1, 2, 3).
        let spec = Spec {
            slots: Vec::new(),
            bits: 2,
            from: 1,
            to: 3,
        };
        assert_eq!(spec.start(), 2);
        assert_eq!(spec.reached(1), Reached::Before); // unit 2
        assert_eq!(spec.reached(3), Reached::End); // unit 3, exactly
        assert_eq!(spec.reached(0), Reached::Past); // wrapped
        // A bigger table: cursor 0b101 is in unit rev(0b01) = 2.
        assert_eq!(spec.reached(0b101), Reached::Before);
        // Cursor 0b111 is inside unit 3: past the end.
        assert_eq!(spec.reached(0b111), Reached::Past);
        let last = Spec {
            from: 3,
            to: 4,
            ..spec
        };
        assert_eq!(last.reached(0), Reached::End);
        assert_eq!(last.reached(0b1011), Reached::Before);
    }

    #[test]
    fn places_follow_the_reversed_cursor_and_the_range_end() {
        // 4 units of 2^64 / 4: cursor 0b01 (bucket 1 of a table of 4) is
        // unit rev(0b01) = 2, cursor 0b10 unit 1.
        assert_eq!(place(0b01), 2u128 << 62);
        assert_eq!(place(0b10), 1u128 << 62);
        assert_eq!(place_after(0), 1u128 << 64);
        let spec = Spec {
            slots: Vec::new(),
            bits: 2,
            from: 1,
            to: 3,
        };
        assert_eq!(spec.end_place(), 3u128 << 62);
        assert!(place(spec.start()) < spec.end_place());
        let whole = Spec {
            bits: 0,
            from: 0,
            to: 1,
            ..spec
        };
        assert_eq!(whole.end_place(), 1u128 << 64);
        // A COUNT: at least 1, at most SCAN_COUNT, SCAN_COUNT when nothing moved.
        assert_eq!(share(0, 10), 1);
        assert_eq!(share(25, 10), 3);
        assert_eq!(share(u128::MAX, 1), SCAN_COUNT);
        assert_eq!(share(5, 0), SCAN_COUNT);
    }

    #[test]
    fn server_info_names_the_cursor_layout() {
        let redis7 = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n";
        assert!(parse_info(redis7, false).buckets);
        assert!(parse_info(redis7, true).buckets);
        assert_eq!(parse_info(redis7, false).run_id, "abc");
        let redis74 = "redis_version:7.4.1\r\nrun_id:x\r\n";
        assert!(parse_info(redis74, false).buckets);
        assert!(!parse_info(redis74, true).buckets);
        let valkey = "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.0\r\n";
        assert!(!parse_info(valkey, false).buckets);
    }

    #[test]
    fn the_slot_map_comes_from_cluster_nodes() {
        let text = "id1 127.0.0.1:7002@17002 master - 0 0 2 connected 5461-10922\n\
                    id2 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [5461->-id1]\n\
                    id3 127.0.0.1:7004@17004 slave id2 0 0 1 connected\n";
        let map = parse_slot_map(text);
        assert_eq!(map.len(), 2);
        assert_eq!(map[0].0.port, 7001);
        assert_eq!(map[0].1, vec![(0, 5460)]);
        let spec = Spec {
            slots: vec![(5000, 6000)],
            bits: 0,
            from: 0,
            to: 1,
        };
        let (nodes, print) = owners(&map, &spec);
        assert_eq!(nodes.len(), 2);
        assert_eq!(print.len(), 16);
    }
}
