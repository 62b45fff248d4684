//! The index of a move or copy: one summary per join value of the sources
//! ([`crate::lang::join`]), built in one scan of the source kind, kept in
//! memory up to a byte budget and spilled past it to a redb scratch file (as
//! the dry run's change log does), then looked up a page of targets at a time.
//!
//! With it a move or copy reads each kind a fixed number of times and writes
//! each entity once:
//!
//! | pass | reads | writes |
//! |---|---|---|
//! | index build | the sources | - |
//! | safety check (\[SE\] Proposition 2) | the targets (and, only when one conflicts, the sources again for the detail) | - |
//! | target step | the targets | each target once |
//! | move: deliveries | the targets (after their step) | - |
//! | move: source step | the sources | each source once |

use std::collections::HashMap;
use std::marker::PhantomData;

use crate::lang::Transfer;
use crate::lang::eval::{self, EvalOptions, SourceOutcome, TargetResolution};
use crate::lang::join::{self, Group, GroupKey};
use crate::model::codec::{self, ValueReader};
use crate::model::{Entity, Key, Value};
use crate::store::{Cursor, Filter, ScanPage, ScanRequest, Store, StoreExt, VersionFilter};

use super::flat_table::FlatTable;
use crate::migration::error::{MigrateError, Result};
use crate::migration::plan::Stage;
use crate::migration::progress::Progress;

/// How many conflicting targets a refusal or a dry run lists in detail (all are counted).
pub(crate) const CONFLICT_DETAIL: usize = 20;

/// How many writes of one conflicting target are listed (a cross product can have millions).
const WRITES_DETAIL: usize = 20;

fn spill_err(what: &str, e: impl std::fmt::Display) -> MigrateError {
    MigrateError::Store {
        context: format!("the join index's scratch file: {what}"),
        source: crate::store::Error::new(crate::store::ErrorKind::Unexpected, e.to_string()),
    }
}

/// A summary the index keeps per group: mergeable, and kept (in memory as on
/// disk) in a flat binary form that is read without building a map.
pub(crate) trait Summary: Sized {
    /// Merges the summary of other entities into this one.
    fn merge(&mut self, other: Self);
    /// Appends its flat binary form to `out`.
    fn encode(&self, out: &mut Vec<u8>) -> Result<()>;
    /// Back from [`Summary::encode`]'s form.
    fn decode(bytes: &[u8]) -> Result<Self>;
}

fn codec_err(e: crate::model::codec::CodecError) -> MigrateError {
    spill_err("decoding a summary", e)
}

fn put(v: &Value, out: &mut Vec<u8>) -> Result<()> {
    codec::put_value(v, out).map_err(|e| spill_err("encoding a summary", e))
}

/// The flags byte of a [`Group`]'s flat form.
mod flag {
    pub(super) const MIXED: u8 = 1;
    pub(super) const LAST_SOME: u8 = 2;
    pub(super) const LITERAL: u8 = 4;
    pub(super) const LITERAL_LAST_VALUE: u8 = 8;
    pub(super) const FIRST_SOME: u8 = 16;
    pub(super) const ALL: u8 = 31;
}

/// What the safety check needs of a [`Group`]'s flat form, read without
/// decoding its values: `(mixed, sources, with_value)`.
fn group_counts(bytes: &[u8]) -> Result<(bool, u64, u64)> {
    let mut r = ValueReader::new(bytes);
    let flags = r.byte().map_err(codec_err)?;
    let sources = r.u64().map_err(codec_err)?;
    let with_value = r.u64().map_err(codec_err)?;
    Ok((flags & flag::MIXED != 0, sources, with_value))
}

/// A [`Group`]'s flat form:
/// `flags sources(varint) with_value(varint) [last_some: id value]
/// [literal: last_id [last_value] [first_some: id value]]`, values as the
/// entity codec writes them.
impl Summary for Group {
    fn merge(&mut self, other: Self) {
        Group::merge(self, other);
    }
    fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut flags = 0;
        if self.mixed {
            flags |= flag::MIXED;
        }
        if self.last_some.is_some() {
            flags |= flag::LAST_SOME;
        }
        if let Some(l) = &self.literal {
            flags |= flag::LITERAL;
            if l.last.1.is_some() {
                flags |= flag::LITERAL_LAST_VALUE;
            }
            if l.first_some.is_some() {
                flags |= flag::FIRST_SOME;
            }
        }
        out.push(flags);
        codec::put_u64(self.sources, out);
        codec::put_u64(self.with_value, out);
        if let Some((id, v)) = &self.last_some {
            put(id, out)?;
            put(v, out)?;
        }
        if let Some(l) = &self.literal {
            put(&l.last.0, out)?;
            if let Some(v) = &l.last.1 {
                put(v, out)?;
            }
            if let Some((id, v)) = &l.first_some {
                put(id, out)?;
                put(v, out)?;
            }
        }
        Ok(())
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = ValueReader::new(bytes);
        let flags = r.byte().map_err(codec_err)?;
        if flags & !flag::ALL != 0
            || (flags & flag::LITERAL == 0
                && flags & (flag::LITERAL_LAST_VALUE | flag::FIRST_SOME) != 0)
        {
            return Err(spill_err("decoding", "a malformed summary"));
        }
        let sources = r.u64().map_err(codec_err)?;
        let with_value = r.u64().map_err(codec_err)?;
        let mut pair = |present: bool| -> Result<Option<(Value, Value)>> {
            if !present {
                return Ok(None);
            }
            let id = r.value().map_err(codec_err)?;
            Ok(Some((id, r.value().map_err(codec_err)?)))
        };
        let last_some = pair(flags & flag::LAST_SOME != 0)?;
        let literal = if flags & flag::LITERAL != 0 {
            let id = r.value().map_err(codec_err)?;
            let value = if flags & flag::LITERAL_LAST_VALUE != 0 {
                Some(r.value().map_err(codec_err)?)
            } else {
                None
            };
            let first_some = if flags & flag::FIRST_SOME != 0 {
                let id = r.value().map_err(codec_err)?;
                Some((id, r.value().map_err(codec_err)?))
            } else {
                None
            };
            Some(Box::new(join::LiteralEnds {
                last: (id, value),
                first_some,
            }))
        } else {
            None
        };
        r.end().map_err(codec_err)?;
        Ok(Group {
            sources,
            with_value,
            mixed: flags & flag::MIXED != 0,
            last_some,
            literal,
        })
    }
}

/// The values delivered to the targets of a group (a move's deliveries).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Values(Vec<Value>);

/// Flat form: `count(varint) value*`.
impl Summary for Values {
    fn merge(&mut self, other: Self) {
        for v in other.0 {
            if !self.0.contains(&v) {
                self.0.push(v);
            }
        }
    }
    fn encode(&self, out: &mut Vec<u8>) -> Result<()> {
        codec::put_u64(self.0.len() as u64, out);
        self.0.iter().try_for_each(|v| put(v, out))
    }
    fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = ValueReader::new(bytes);
        let n = r.u64().map_err(codec_err)?;
        // Each value takes at least a byte: a corrupt count cannot make us allocate without bound.
        let mut items = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(bytes.len()));
        for _ in 0..n {
            items.push(r.value().map_err(codec_err)?);
        }
        r.end().map_err(codec_err)?;
        Ok(Values(items))
    }
}

#[cfg(feature = "embedded")]
mod scratch {
    //! The spill: a redb file without durability, removed when dropped.

    use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

    use super::{Result, spill_err};

    const TABLE: TableDefinition<'static, &[u8], &[u8]> = TableDefinition::new("groups");
    /// `tern-join-<pid>-<uuid>.redb` in the temporary folder.
    const PREFIX: &str = "tern-join-";
    /// redb's page cache (its default is 1 GiB).
    const CACHE_BYTES: usize = 16 << 20;

    pub(super) struct Scratch {
        db: Database,
        path: std::path::PathBuf,
    }

    impl Scratch {
        pub(super) fn new() -> Result<Scratch> {
            let path = crate::migrate::changelog::backing::scratch_path(PREFIX);
            let db = redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .create(&path)
                .map_err(|e| spill_err(&format!("creating {}", path.display()), e))?;
            Ok(Scratch { db, path })
        }

        /// Merges `rows` (sorted by key) into the table: `merge(old, new)`
        /// gives the stored bytes. `fresh`: the table is empty (the first
        /// spill), so nothing is looked up.
        pub(super) fn merge_all<'r>(
            &self,
            rows: impl Iterator<Item = (&'r [u8], &'r [u8])>,
            fresh: bool,
            mut merge: impl FnMut(&[u8], &[u8]) -> Result<Vec<u8>>,
        ) -> Result<()> {
            let mut txn = self.db.begin_write().map_err(|e| spill_err("writing", e))?;
            txn.set_durability(Durability::None)
                .map_err(|e| spill_err("writing", e))?;
            {
                let mut table = txn.open_table(TABLE).map_err(|e| spill_err("writing", e))?;
                for (k, v) in rows {
                    let merged = if fresh {
                        None
                    } else {
                        match table.get(k).map_err(|e| spill_err("reading", e))? {
                            Some(old) => Some(merge(old.value(), v)?),
                            None => None,
                        }
                    };
                    table
                        .insert(k, merged.as_deref().unwrap_or(v))
                        .map_err(|e| spill_err("writing", e))?;
                }
            }
            txn.commit().map_err(|e| spill_err("writing", e))
        }

        /// The stored bytes of `keys`, in one read transaction.
        pub(super) fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
            let txn = self.db.begin_read().map_err(|e| spill_err("reading", e))?;
            let table = match txn.open_table(TABLE) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; keys.len()]),
                Err(e) => return Err(spill_err("reading", e)),
            };
            keys.iter()
                .map(|k| {
                    Ok(table
                        .get(*k)
                        .map_err(|e| spill_err("reading", e))?
                        .map(|v| v.value().to_vec()))
                })
                .collect()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(not(feature = "embedded"))]
mod scratch {
    //! Without redb there is nowhere to spill: everything stays in memory.

    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use super::Result;

    pub(super) struct Scratch(Mutex<BTreeMap<Vec<u8>, Vec<u8>>>);

    impl Scratch {
        pub(super) fn new() -> Result<Scratch> {
            Ok(Scratch(Mutex::new(BTreeMap::new())))
        }

        pub(super) fn merge_all<'r>(
            &self,
            rows: impl Iterator<Item = (&'r [u8], &'r [u8])>,
            _fresh: bool,
            mut merge: impl FnMut(&[u8], &[u8]) -> Result<Vec<u8>>,
        ) -> Result<()> {
            let mut map = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (k, v) in rows {
                let v = match map.get(k) {
                    Some(old) => merge(old, v)?,
                    None => v.to_vec(),
                };
                map.insert(k.to_vec(), v);
            }
            Ok(())
        }

        pub(super) fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
            let map = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Ok(keys.iter().map(|k| map.get(*k).cloned()).collect())
        }
    }
}

/// A map from group keys to summaries in their flat form: in memory up to
/// `budget` bytes, then spilled (merged) into a scratch file; after
/// [`SpillMap::finish`] every entry is in exactly one of the two.
pub(crate) struct SpillMap<V: Summary> {
    memory: FlatTable,
    budget: usize,
    scratch: Option<scratch::Scratch>,
    spills: u64,
    /// Reused to encode summaries.
    buf: Vec<u8>,
    summary: PhantomData<fn() -> V>,
}

fn merge_flat<V: Summary>(old: &[u8], new: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let mut old = V::decode(old)?;
    old.merge(V::decode(new)?);
    out.clear();
    old.encode(out)
}

impl<V: Summary> SpillMap<V> {
    /// An empty map that keeps at most about `budget` bytes in memory.
    pub(crate) fn new(budget: usize) -> SpillMap<V> {
        SpillMap {
            memory: FlatTable::new(budget),
            budget,
            scratch: None,
            spills: 0,
            buf: Vec::new(),
            summary: PhantomData,
        }
    }

    /// Merges `v` into the entry of `key`.
    pub(crate) fn add(&mut self, key: &[u8], v: V) -> Result<()> {
        self.buf.clear();
        match self.memory.get(key) {
            Some(old) => {
                let mut merged = V::decode(old)?;
                merged.merge(v);
                merged.encode(&mut self.buf)?;
            }
            None => v.encode(&mut self.buf)?,
        }
        if !self.memory.set(key, &self.buf) {
            // The arena is full (4 GiB): spill, then the entry fits.
            self.spill()?;
            if !self.memory.set(key, &self.buf) {
                return Err(spill_err(
                    "indexing",
                    "a join value and summary of 4 GiB or more",
                ));
            }
        }
        if self.memory.bytes() > self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// Moves the entries in memory to the scratch file, merging them with those already there.
    fn spill(&mut self) -> Result<()> {
        if self.memory.is_empty() {
            return Ok(());
        }
        if self.scratch.is_none() {
            self.scratch = Some(scratch::Scratch::new()?);
        }
        let fresh = self.spills == 0;
        self.spills += 1;
        if let Some(scratch) = &self.scratch {
            let mut out = Vec::new();
            scratch.merge_all(self.memory.sorted(), fresh, |old, new| {
                merge_flat::<V>(old, new, &mut out)?;
                Ok(out.clone())
            })?;
        }
        self.memory.clear();
        Ok(())
    }

    /// Ends the building: once anything spilled, everything goes to the scratch file.
    pub(crate) fn finish(&mut self) -> Result<()> {
        if self.scratch.is_some() {
            self.spill()?;
        }
        Ok(())
    }

    /// How many times the map spilled to disk.
    pub(crate) fn spills(&self) -> u64 {
        self.spills
    }

    /// Did it spill (lookups then read the scratch file)?
    fn spilled(&self) -> bool {
        self.scratch.is_some()
    }

    /// The flat forms of `keys` (sorted, each once), each with its key
    /// (after [`SpillMap::finish`]): borrowed from memory while nothing
    /// spilled, else read from the scratch file in one transaction.
    fn get_flat<'k>(&self, keys: &[&'k GroupKey]) -> Result<Flat<'_, 'k>> {
        match &self.scratch {
            None => Ok(Flat::Memory(&self.memory)),
            Some(scratch) => {
                let raw: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                Ok(Flat::Read(
                    keys.iter()
                        .copied()
                        .zip(scratch.get_many(&raw)?)
                        .filter_map(|(k, v)| Some((k, v?)))
                        .collect(),
                ))
            }
        }
    }

    /// The summaries of `keys` (after [`SpillMap::finish`]).
    pub(crate) fn get_many(&self, keys: &[&GroupKey]) -> Result<Vec<Option<V>>> {
        let flat = self.get_flat(keys)?;
        keys.iter()
            .map(|k| flat.get(k).map(V::decode).transpose())
            .collect()
    }
}

/// Flat summaries found for a page's keys.
enum Flat<'m, 'k> {
    /// The map in memory (nothing spilled).
    Memory(&'m FlatTable),
    /// Those of the page's keys read from the scratch file.
    Read(HashMap<&'k GroupKey, Vec<u8>>),
}

impl Flat<'_, '_> {
    fn get(&self, key: &GroupKey) -> Option<&[u8]> {
        match self {
            Flat::Memory(table) => table.get(key.as_slice()),
            Flat::Read(map) => map.get(key).map(Vec::as_slice),
        }
    }
}

/// A move or copy's index of its sources: one [`Group`] per join value.
pub struct JoinIndex {
    transfer: Transfer,
    opts: EvalOptions,
    groups: SpillMap<Group>,
    /// Sources read while building.
    pub(crate) sources_read: u64,
}

/// A target's groups and the verdict on their union; `None` when θ2 rejects it.
type Judged<R> = Option<(Vec<GroupKey>, R)>;

/// What the index says about one target of a page.
pub struct Resolved {
    /// What it becomes (forced when it conflicts); source lists are empty.
    pub resolution: TargetResolution,
    /// Do its sources disagree?
    pub conflict: bool,
}

impl JoinIndex {
    /// An empty index for `t`.
    pub fn new(t: &Transfer, opts: &EvalOptions, budget: usize) -> JoinIndex {
        JoinIndex {
            transfer: t.clone(),
            opts: *opts,
            groups: SpillMap::new(budget),
            sources_read: 0,
        }
    }

    /// Adds one entity of the source kind (ignored unless θ1 holds and it can join).
    pub fn add_source(&mut self, source: &Entity) -> Result<()> {
        self.sources_read += 1;
        if !eval::source_matches(&self.transfer, source) {
            return Ok(());
        }
        if let Some(g) = join::source_group(&self.transfer, source) {
            let one = Group::of_source(
                &source.key.id,
                eval::transfer_value(&self.transfer, source),
                &self.opts,
            );
            self.groups.add(&g, one)?;
        }
        Ok(())
    }

    /// Ends the building.
    pub fn finish(&mut self) -> Result<()> {
        self.groups.finish()
    }

    /// How many times the index spilled to disk.
    pub fn spills(&self) -> u64 {
        self.groups.spills()
    }

    /// Resolves a page of targets (as they are before the statement): `None`
    /// for a target θ2 rejects.
    pub fn resolve(&self, targets: &[&Entity]) -> Result<Vec<Option<Resolved>>> {
        let opts = self.opts;
        Ok(self
            .judge(
                targets,
                |flat| Ok(Group::decode(flat)?.resolve(&opts)),
                |g| g.resolve(&opts),
            )?
            .into_iter()
            .map(|judged| {
                let (_, (resolution, conflict)) = judged?;
                Some(Resolved {
                    resolution,
                    conflict,
                })
            })
            .collect())
    }

    /// The groups of each target of a page that conflicts (its sources
    /// disagree): what the safety check needs of [`JoinIndex::resolve`],
    /// without building the resolutions. A target of one group is judged
    /// from the counts at the head of its flat summary, decoding no value.
    fn conflicting(&self, targets: &[&Entity]) -> Result<Vec<Option<Vec<GroupKey>>>> {
        let opts = self.opts;
        let conflicts = move |mixed: bool, sources: u64, with_value: u64| {
            sources > 0
                && (mixed || (opts.literal_transfer && with_value > 0 && with_value < sources))
        };
        Ok(self
            .judge(
                targets,
                |flat| {
                    let (mixed, sources, with_value) = group_counts(flat)?;
                    Ok(conflicts(mixed, sources, with_value))
                },
                |g| g.sources > 0 && g.conflicts(&opts),
            )?
            .into_iter()
            .map(|judged| judged.filter(|(_, conflict)| *conflict).map(|(g, _)| g))
            .collect())
    }

    /// The verdict on the union of the groups each target of a page meets
    /// (with those groups), `None` for a target θ2 rejects: `one` of the flat
    /// summary of a target's only group (the common case, judged where it
    /// lies), `union` of the decoded and merged summaries otherwise. The
    /// page's distinct groups are looked up once (in one transaction once
    /// spilled).
    fn judge<R>(
        &self,
        targets: &[&Entity],
        one: impl Fn(&[u8]) -> Result<R>,
        union: impl Fn(&Group) -> R,
    ) -> Result<Vec<Judged<R>>> {
        let t = &self.transfer;
        let per_target: Vec<Option<Vec<GroupKey>>> = targets
            .iter()
            .map(|e| eval::target_matches(t, e).then(|| join::target_groups(t, e)))
            .collect();
        // In memory each group is looked up where it lies; once spilled the
        // page's distinct groups are read in key order.
        let mut keys: Vec<&GroupKey> = Vec::new();
        if self.groups.spilled() {
            keys = per_target.iter().flatten().flatten().collect();
            keys.sort_unstable();
            keys.dedup();
        }
        let flat = self.groups.get_flat(&keys)?;
        let verdicts: Vec<Option<R>> = per_target
            .iter()
            .map(|groups| {
                let Some(groups) = groups else {
                    return Ok(None);
                };
                let mut found = groups.iter().filter_map(|k| flat.get(k));
                Ok(Some(match (found.next(), found.next()) {
                    (None, _) => union(&Group::default()),
                    (Some(only), None) => one(only)?,
                    (Some(a), Some(b)) => {
                        let mut all = Group::decode(a)?;
                        all.merge(Group::decode(b)?);
                        for g in found {
                            all.merge(Group::decode(g)?);
                        }
                        union(&all)
                    }
                }))
            })
            .collect::<Result<_>>()?;
        drop(flat);
        Ok(per_target
            .into_iter()
            .zip(verdicts)
            .map(|(groups, v)| Some((groups?, v?)))
            .collect())
    }
}

/// Reports a pass that reads a whole kind, as the stages do.
struct Pass<'a> {
    progress: &'a dyn Progress,
    done: u64,
}

impl<'a> Pass<'a> {
    async fn start(
        progress: &'a dyn Progress,
        store: &dyn Store,
        description: String,
        kind: &str,
        estimate: bool,
    ) -> Pass<'a> {
        let total = if estimate {
            store.estimate_count(kind).await.ok().flatten()
        } else {
            None
        };
        progress.pass_started(&description, total);
        Pass { progress, done: 0 }
    }

    fn page(&mut self, n: usize) {
        self.done += n as u64;
        self.progress.pass_progress(self.done);
    }

    fn finish(self) {
        self.progress.pass_finished(self.done);
    }
}

/// How a pass reads: page size, whether to ask for estimates, the progress receiver.
#[derive(Clone, Copy)]
pub(crate) struct Reading<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) page: usize,
    pub(crate) estimate: bool,
    pub(crate) progress: &'a dyn Progress,
}

/// The top-level properties of a source that the index build and the
/// conflict detail read: the moved/copied property, the join property and
/// those θ1 tests.
fn source_properties(t: &Transfer) -> Vec<String> {
    top_level(
        std::iter::once(&t.prop.path)
            .chain(t.join.as_ref().map(|j| &j.source.path))
            .chain(t.source_conditions.iter().map(|a| &a.prop.path)),
    )
}

/// The top-level properties of a target that the safety check reads (the join
/// property and those θ2 tests) and, `with_value`, the property itself (a
/// move's deliveries).
fn target_properties(t: &Transfer, with_value: bool) -> Vec<String> {
    top_level(
        t.join
            .as_ref()
            .map(|j| &j.target.path)
            .into_iter()
            .chain(with_value.then_some(&t.prop.path))
            .chain(t.target_conditions.iter().map(|a| &a.prop.path)),
    )
}

/// The top-level properties of `paths`, sorted, each once.
fn top_level<'a>(paths: impl Iterator<Item = &'a Vec<String>>) -> Vec<String> {
    let mut props: Vec<String> = paths.filter_map(|p| p.first().cloned()).collect();
    props.sort_unstable();
    props.dedup();
    props
}

impl Reading<'_> {
    /// One page of the entities of `kind` after `cursor`.
    async fn page(
        &self,
        kind: &str,
        filter: &Filter,
        cursor: Option<Cursor>,
        properties: &[String],
    ) -> Result<ScanPage> {
        self.store
            .scan_projected(
                kind,
                ScanRequest {
                    filter: filter.clone(),
                    cursor,
                    limit: self.page.max(100),
                },
                properties,
            )
            .await
            .map_err(MigrateError::store("reading a kind for a move or copy"))
    }

    /// Calls `each` with every page of the entities of `kind` that pass
    /// `filter`, each holding at least the top-level `properties`
    /// ([`ProjectedScan::scan_projected`](crate::store::ProjectedScan::scan_projected): these passes write nothing back). The next
    /// page is asked for before `each` works on the current one, so the
    /// store (its blocking thread, or a server) reads while this thread
    /// works: these passes write nothing, so what the next page holds does
    /// not depend on `each`.
    async fn scan(
        &self,
        kind: &str,
        filter: Filter,
        properties: &[String],
        description: String,
        mut each: impl FnMut(Vec<Entity>) -> Result<()>,
    ) -> Result<()> {
        let mut pass =
            Pass::start(self.progress, self.store, description, kind, self.estimate).await;
        let mut page = self.page(kind, &filter, None, properties).await?;
        loop {
            pass.page(page.entities.len());
            let Some(cursor) = page.cursor.take() else {
                each(page.entities)?;
                break;
            };
            let entities = page.entities;
            let (next, done) =
                futures::join!(self.page(kind, &filter, Some(cursor), properties), async {
                    each(entities)
                });
            done?;
            page = next?;
        }
        pass.finish();
        Ok(())
    }
}

/// Builds the index of `t`'s sources in one scan of the source kind.
pub(crate) async fn build(
    r: Reading<'_>,
    t: &Transfer,
    opts: &EvalOptions,
    budget: usize,
) -> Result<JoinIndex> {
    let mut index = JoinIndex::new(t, opts, budget);
    r.scan(
        &t.prop.kind,
        sources_filter(t),
        &source_properties(t),
        format!("indexing {} by its join value", t.prop.kind),
        |page| page.iter().try_for_each(|s| index.add_source(s)),
    )
    .await?;
    index.finish()?;
    Ok(index)
}

/// What the safety check found.
#[derive(Debug, Default)]
pub(crate) struct Check {
    /// Conflicting targets.
    pub(crate) conflict_count: u64,
    /// The first [`CONFLICT_DETAIL`] of them, described with their writes.
    pub(crate) conflicts: Vec<String>,
}

/// Describes a conflicting target and its writes (at most [`WRITES_DETAIL`] of them).
pub(crate) fn describe_conflict(target: &Key, writes: &[(Key, Option<Value>)]) -> String {
    let mut parts: Vec<String> = writes
        .iter()
        .take(WRITES_DETAIL)
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => format!("{k}=(absent)"),
        })
        .collect();
    if writes.len() > WRITES_DETAIL {
        parts.push(format!("and {} more", writes.len() - WRITES_DETAIL));
    }
    format!("{target}: {}", parts.join(", "))
}

/// The filter of a scan of the targets of `t` (any version).
fn targets_filter(t: &Transfer) -> Filter {
    Filter {
        version: VersionFilter::Any,
        conditions: eval::target_query(t),
    }
}

/// The filter of a scan of the sources of `t` (any version).
fn sources_filter(t: &Transfer) -> Filter {
    Filter {
        version: VersionFilter::Any,
        conditions: eval::conditions(&t.source_conditions),
    }
}

/// The safety check of \[SE\] Proposition 2 over the store: one scan of the
/// targets against the index; when a target conflicts, one more scan of the
/// sources lists the writes of the first [`CONFLICT_DETAIL`].
pub(crate) async fn check(r: Reading<'_>, index: &JoinIndex) -> Result<Check> {
    let t = &index.transfer;
    let mut out = Check::default();
    let mut detailed: Vec<(Key, Vec<GroupKey>)> = Vec::new();
    r.scan(
        &t.to_kind,
        targets_filter(t),
        &target_properties(t, false),
        format!("checking {} for conflicting writes (safety)", t.to_kind),
        |page| {
            let refs: Vec<&Entity> = page.iter().collect();
            for (target, groups) in page.iter().zip(index.conflicting(&refs)?) {
                if let Some(groups) = groups {
                    out.conflict_count += 1;
                    if detailed.len() < CONFLICT_DETAIL {
                        detailed.push((target.key.clone(), groups));
                    }
                }
            }
            Ok(())
        },
    )
    .await?;
    if detailed.is_empty() {
        return Ok(out);
    }
    let wanted: std::collections::HashSet<&GroupKey> =
        detailed.iter().flat_map(|(_, g)| g).collect();
    let mut entries: HashMap<GroupKey, Vec<(Key, Option<Value>)>> = HashMap::new();
    r.scan(
        &t.prop.kind,
        sources_filter(t),
        &source_properties(t),
        format!("listing the conflicting writes of {}", t.prop.kind),
        |page| {
            for s in page.iter().filter(|s| eval::source_matches(t, s)) {
                if let Some(g) = join::source_group(t, s).filter(|g| wanted.contains(g)) {
                    entries
                        .entry(g)
                        .or_default()
                        .push((s.key.clone(), eval::transfer_value(t, s).cloned()));
                }
            }
            Ok(())
        },
    )
    .await?;
    for (target, groups) in &detailed {
        let writes = join::conflict_writes(
            groups
                .iter()
                .filter_map(|g| entries.get(g))
                .flatten()
                .cloned(),
            &index.opts,
        );
        out.conflicts.push(describe_conflict(target, &writes));
    }
    if out.conflict_count > out.conflicts.len() as u64 {
        out.conflicts.push(format!(
            "... and {} more conflicting targets",
            out.conflict_count - out.conflicts.len() as u64
        ));
    }
    Ok(out)
}

/// A move's deliveries: for each group, the values its targets hold after the
/// target step. A source is delivered when its group's targets hold its value
/// ([`eval::move_source_outcome`]: θ2 and the join evaluated on the targets as
/// they are after the step).
pub(crate) async fn deliveries(
    r: Reading<'_>,
    t: &Transfer,
    budget: usize,
) -> Result<SpillMap<Values>> {
    let mut delivered = SpillMap::new(budget);
    r.scan(
        &t.to_kind,
        targets_filter(t),
        &target_properties(t, true),
        format!("finding what {} received", t.to_kind),
        |page| {
            for target in page.iter().filter(|e| eval::target_matches(t, e)) {
                let Some(held) = eval::transfer_value(t, target) else {
                    continue;
                };
                for g in join::target_groups(t, target) {
                    delivered.add(&g, Values(vec![held.clone()]))?;
                }
            }
            Ok(())
        },
    )
    .await?;
    delivered.finish()?;
    Ok(delivered)
}

/// The new state of each entity of a page: `(new, data changed)`.
pub(crate) type Computed = Vec<Option<(Entity, bool)>>;

/// The new state of a page of targets: `(new, data changed)` each, and the
/// first conflict (a target whose sources disagree) when not `forced`.
pub(crate) fn compute_targets(
    index: &JoinIndex,
    batch: &[Entity],
    forced: bool,
) -> Result<(Computed, Option<String>)> {
    let refs: Vec<&Entity> = batch.iter().collect();
    let mut out = Vec::with_capacity(batch.len());
    let mut conflict = None;
    for (target, resolved) in batch.iter().zip(index.resolve(&refs)?) {
        let mut new = target.clone();
        new.version += 1;
        let mut changed = false;
        if let Some(resolved) = resolved {
            if resolved.conflict && !forced && conflict.is_none() {
                conflict = Some(target.key.to_string());
            }
            changed = resolved
                .resolution
                .apply(&index.transfer, &mut new.value)
                .is_some_and(|e| e.is_changed());
        }
        out.push(Some((new, changed)));
    }
    Ok((out, conflict))
}

/// The new state of a page of a move's sources: each loses the property when
/// delivered. Also returns how many kept it ([`SourceOutcome::Kept`]).
pub(crate) fn compute_sources(
    t: &Transfer,
    delivered: &SpillMap<Values>,
    batch: &[Entity],
) -> Result<(Computed, u64)> {
    let groups: Vec<Option<GroupKey>> = batch
        .iter()
        .map(|s| {
            (eval::source_matches(t, s) && eval::transfer_value(t, s).is_some())
                .then(|| join::source_group(t, s))
                .flatten()
        })
        .collect();
    let mut keys: Vec<&GroupKey> = groups.iter().flatten().collect();
    keys.sort_unstable();
    keys.dedup();
    let found = delivered.get_many(&keys)?;
    let by_key: HashMap<&GroupKey, Values> = keys
        .into_iter()
        .zip(found)
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    let mut kept = 0;
    let mut out = Vec::with_capacity(batch.len());
    for (source, group) in batch.iter().zip(&groups) {
        let outcome = if !eval::source_matches(t, source) {
            SourceOutcome::Unmatched
        } else {
            match eval::transfer_value(t, source) {
                None => SourceOutcome::Lacking,
                Some(v) => {
                    let got = group
                        .as_ref()
                        .and_then(|g| by_key.get(g))
                        .is_some_and(|vals| vals.0.contains(v));
                    if got {
                        SourceOutcome::Delivered
                    } else {
                        SourceOutcome::Kept
                    }
                }
            }
        };
        kept += u64::from(outcome == SourceOutcome::Kept);
        let mut new = source.clone();
        new.version += 1;
        let changed = outcome.apply(t, &mut new.value);
        out.push(Some((new, changed)));
    }
    Ok((out, kept))
}

/// The stage whose move or copy [`precheck`] can check on the store itself:
/// the first stage, when no other stage is a move or copy (no earlier stage
/// changes what it reads, and no later one needs a simulation). Other
/// migrations are checked by a dry run on an overlay.
pub(crate) fn direct_check(plan: &crate::migration::plan::Plan) -> Option<(&Transfer, &str)> {
    let mut transfers = plan
        .stages
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, Stage::Transfer { .. }));
    match (transfers.next(), transfers.next()) {
        (Some((0, Stage::Transfer { transfer, text, .. })), None) => Some((transfer, text)),
        _ => None,
    }
}

/// Builds the index of a migration's only move or copy and runs its safety
/// check on the store, before the run is recorded: an unsafe statement is
/// refused with nothing written and nothing to resume. The index is handed to
/// the stage, which then neither rebuilds nor re-checks it.
pub(crate) async fn precheck(
    r: Reading<'_>,
    t: &Transfer,
    text: &str,
    budget: usize,
) -> Result<JoinIndex> {
    let index = build(r, t, &EvalOptions::default(), budget).await?;
    let found = check(r, &index).await?;
    if found.conflict_count == 0 {
        Ok(index)
    } else {
        Err(MigrateError::Unsafe {
            statement: text.to_owned(),
            conflicts: found.conflicts,
            others: Vec::new(),
        })
    }
}

/// What [`check_on_store`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreCheck {
    /// Entities of the source kind read to build the index.
    pub sources_read: u64,
    /// How many times the index spilled to its scratch file.
    pub spills: u64,
    /// Targets whose sources would write different values.
    pub conflict_count: u64,
    /// The first of them with their writes (see `MigrateError::Unsafe`).
    pub conflicts: Vec<String>,
}

/// The safety check of a move or copy (\[SE\] Proposition 2) on the data a
/// store holds now, without writing: the join index is built in one scan of
/// the source kind (within `run.join_memory`, spilling past it) and every
/// target is checked against it in one scan of the target kind.
///
/// # Errors
/// A store error, or a failure of the index's scratch file.
pub async fn check_on_store(
    store: &dyn Store,
    t: &Transfer,
    run: &crate::migrate::options::RunOptions,
    progress: &dyn Progress,
) -> Result<StoreCheck> {
    let r = Reading {
        store,
        page: run.batch_size,
        estimate: run.estimate_totals,
        progress,
    };
    let index = build(r, t, &EvalOptions::default(), run.join_memory).await?;
    let found = check(r, &index).await?;
    Ok(StoreCheck {
        sources_read: index.sources_read,
        spills: index.spills(),
        conflict_count: found.conflict_count,
        conflicts: found.conflicts,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::model::arb::{arb_id, arb_value};
    use proptest::prelude::*;

    /// The summary of some sources, each `(id, value)`, merged in the order given.
    fn group_of(sources: &[(Value, Option<Value>)], literal: bool) -> Group {
        let opts = EvalOptions {
            literal_transfer: literal,
            ..EvalOptions::default()
        };
        let mut out = Group::default();
        for (id, v) in sources {
            out.merge(Group::of_source(id, v.as_ref(), &opts));
        }
        out
    }

    fn arb_sources() -> impl Strategy<Value = Vec<(Value, Option<Value>)>> {
        prop::collection::vec((arb_id(), prop::option::of(arb_value())), 0..6)
    }

    fn flat<V: Summary>(v: &V) -> Vec<u8> {
        let mut out = Vec::new();
        v.encode(&mut out).unwrap();
        out
    }

    proptest! {
        /// A group's flat form decodes to the same group, and its head gives its counts.
        #[test]
        fn group_flat_form_round_trips(sources in arb_sources(), literal in prop::bool::ANY) {
            let g = group_of(&sources, literal);
            let bytes = flat(&g);
            prop_assert_eq!(&Group::decode(&bytes).unwrap(), &g);
            prop_assert_eq!(group_counts(&bytes).unwrap(), (g.mixed, g.sources, g.with_value));
        }

        /// A move's deliveries round-trip too.
        #[test]
        fn values_flat_form_round_trips(values in prop::collection::vec(arb_value(), 0..5)) {
            let v = Values(values);
            prop_assert_eq!(&Values::decode(&flat(&v)).unwrap(), &v);
        }

        /// The map gives the same merged summaries whether it stays in memory
        /// or spills (a budget of 0 spills at every entry).
        #[test]
        fn spilling_changes_no_summary(
            adds in prop::collection::vec((0u8..6, arb_id(), prop::option::of(arb_value())), 0..24),
            literal in prop::bool::ANY,
        ) {
            let opts = EvalOptions { literal_transfer: literal, ..EvalOptions::default() };
            let mut memory = SpillMap::<Group>::new(usize::MAX);
            let mut spilled = SpillMap::<Group>::new(0);
            let mut expected: HashMap<GroupKey, Group> = HashMap::new();
            for (k, id, v) in &adds {
                let one = Group::of_source(id, v.as_ref(), &opts);
                let key = vec![*k; usize::from(*k)];
                memory.add(&key, one.clone()).unwrap();
                spilled.add(&key, one.clone()).unwrap();
                expected.entry(key).or_default().merge(one);
            }
            memory.finish().unwrap();
            spilled.finish().unwrap();
            prop_assert_eq!(memory.spills(), 0);
            prop_assert_eq!(spilled.spills() > 0, !adds.is_empty());
            let keys: Vec<GroupKey> = (0u8..7).map(|k| vec![k; usize::from(k)]).collect();
            let refs: Vec<&GroupKey> = keys.iter().collect();
            let want: Vec<Option<Group>> = keys.iter().map(|k| expected.get(k).cloned()).collect();
            prop_assert_eq!(&memory.get_many(&refs).unwrap(), &want);
            prop_assert_eq!(&spilled.get_many(&refs).unwrap(), &want);
        }
    }

    #[test]
    fn a_malformed_summary_is_an_error_not_a_panic() {
        for bytes in [
            &[][..],
            &[0xff, 1, 1],
            &[flag::LAST_SOME, 1, 1],
            &[0, 1, 1, 0],
        ] {
            assert!(Group::decode(bytes).is_err(), "{bytes:?}");
        }
        assert!(Values::decode(&[200, 200, 200, 200]).is_err());
    }
}
