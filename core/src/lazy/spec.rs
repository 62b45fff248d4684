//! The installed lazy spec, as a client sees it: for each kind its logical
//! version, the composed chain of steps that brings a stale entity up to it,
//! and the former names (kind renames still pending) to look under on a miss.
//!
//! Everything is read from the store's state document (the ledger keeps the
//! canonical text of every migration), never from files: a client that
//! restarts, or runs on another machine, migrates exactly as the installer meant.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::error::{LazyError, Result};
use crate::migration::plan::{self, Step, StepOp};
use crate::migration::source::{EntityMigration, Migration, MigrationSet};
use crate::migration::state::StateDoc;
use crate::model::{Entity, Key, Map, Version};

/// The chain of one kind: how an entity stored at any older version, under the
/// kind's name or a former one, is brought to the logical version.
#[derive(Debug, Clone)]
pub struct KindChain {
    /// The kind (its current name).
    pub kind: String,
    /// Its logical version.
    pub version: Version,
    /// Former names still holding entities (kind renames of lazy migrations
    /// not yet complete), newest first.
    pub formers: Vec<String>,
    /// Whether a lazy migration of this kind is pending (some entity may be stale).
    pub pending: bool,
    steps: Vec<Step>,
    missing_code: BTreeMap<u32, String>,
    /// [`KindChain::pushdown`], computed once.
    push: std::sync::OnceLock<Option<crate::store::StepsFrom>>,
    /// What recent reads of the kind found, while a migration is pending.
    pub(crate) reads: ReadBias,
}

/// Which read a lazy client tries first for a kind whose migration is
/// pending: the store's migrating read ([`crate::store::FormerNameReads::get_advanced`]:
/// one round trip for a stale entity, a script on Redis) or a plain read (no
/// script for an up-to-date entity, a second call for a stale one). It
/// follows what recent reads found: a count that each stale entity raises and
/// each up-to-date one lowers, within +-[`ReadBias::LIMIT`]; the migrating
/// read first while it is not negative (a new view starts there: right after
/// an install, every entity is stale).
#[derive(Debug, Default)]
pub(crate) struct ReadBias(std::sync::atomic::AtomicI32);

impl Clone for ReadBias {
    fn clone(&self) -> Self {
        ReadBias(std::sync::atomic::AtomicI32::new(
            self.0.load(std::sync::atomic::Ordering::Relaxed),
        ))
    }
}

impl ReadBias {
    /// How far the count goes either way: how many reads of the other kind
    /// it takes at most to change the read tried first.
    pub(crate) const LIMIT: i32 = 16;

    /// Whether to try the migrating read first.
    pub(crate) fn stale_first(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) >= 0
    }

    /// Records what a read found.
    pub(crate) fn saw(&self, stale: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let _ = self.0.fetch_update(Relaxed, Relaxed, |b| {
            Some(if stale {
                (b + 1).min(Self::LIMIT)
            } else {
                (b - 1).max(-Self::LIMIT)
            })
        });
    }
}

impl KindChain {
    /// A kind no migration has touched: entities pass through.
    pub(crate) fn untouched(kind: &str) -> KindChain {
        KindChain {
            kind: kind.to_owned(),
            version: 0,
            formers: Vec::new(),
            pending: false,
            steps: Vec::new(),
            missing_code: BTreeMap::new(),
            push: std::sync::OnceLock::new(),
            reads: ReadBias::default(),
        }
    }

    /// `entity` (found under the kind's name or a former one) brought to the
    /// logical version, keyed under the kind's name: every pending step,
    /// oldest first, composed in one value. An entity already at the version is
    /// returned as is (re-keyed).
    ///
    /// # Errors
    /// [`LazyError::EntityNewer`] above the version; [`LazyError::UnknownTag`]
    /// when the ledger lacks a step; [`LazyError::NeedsEagerStep`] below a
    /// move or copy; [`LazyError::MissingCode`], [`LazyError::Transform`].
    pub fn migrate(&self, entity: &Entity) -> Result<Entity> {
        let key = Key {
            kind: self.kind.clone(),
            id: entity.key.id.clone(),
        };
        if entity.version > self.version {
            return Err(LazyError::EntityNewer {
                key: entity.key.clone(),
                version: entity.version,
                declared: self.version,
            });
        }
        let mut value: Map = entity.value.clone();
        let mut at = entity.version;
        for step in self
            .steps
            .iter()
            .filter(|s| s.version > entity.version && s.version <= self.version)
        {
            if step.version != at + 1 {
                break;
            }
            match &step.op {
                StepOp::Local(_) | StepOp::Code(_) => {
                    if let Some(name) = self.missing_code.get(&step.migration) {
                        return Err(LazyError::MissingCode {
                            migration: step.migration,
                            name: name.clone(),
                            kind: self.kind.clone(),
                        });
                    }
                    crate::migration::apply::apply_per_entity(step, &key, &mut value).map_err(
                        |e| LazyError::Transform {
                            key: entity.key.clone(),
                            message: e.to_string(),
                        },
                    )?;
                }
                StepOp::TransferTarget { transfer, is_move } => {
                    let stmt = if *is_move {
                        crate::lang::Statement::Move(transfer.clone())
                    } else {
                        crate::lang::Statement::Copy(transfer.clone())
                    };
                    return Err(LazyError::NeedsEagerStep {
                        key: entity.key.clone(),
                        version: entity.version,
                        step: stmt.to_string(),
                    });
                }
                StepOp::MoveSource { .. } => {
                    // A late source keeps its property, as the eager engine's census does.
                }
            }
            at = step.version;
        }
        if at != self.version {
            return Err(LazyError::UnknownTag {
                key: entity.key.clone(),
                kind: self.kind.clone(),
                version: entity.version,
                declared: self.version,
            });
        }
        Ok(Entity {
            key,
            version: self.version,
            value,
        })
    }
}

impl KindChain {
    /// The longest run of this kind's last steps that a store can run inside
    /// the server ([`crate::store::Pushdown::update_in_place`]), as the version
    /// its first step applies to and the server-side steps; `None` when the
    /// last step cannot run there (a Rust transform, the target of a move or
    /// copy, a nested rename, a step whose code this client lacks).
    ///
    /// Entities below the returned version are not reached by these steps:
    /// the sweep's census finds them and the per-entity path migrates them.
    pub fn pushdown(&self) -> Option<&crate::store::StepsFrom> {
        self.push.get_or_init(|| self.compute_pushdown()).as_ref()
    }

    fn compute_pushdown(&self) -> Option<crate::store::StepsFrom> {
        let mut start = self.steps.len();
        let mut expected = self.version;
        while start > 0 {
            let step = &self.steps[start - 1];
            let runs_there = step.version == expected
                && !self.missing_code.contains_key(&step.migration)
                && crate::migration::apply::pushdown_steps(std::slice::from_ref(step)).is_some();
            if !runs_there {
                break;
            }
            start -= 1;
            expected -= 1;
        }
        let suffix = &self.steps[start..];
        if suffix.is_empty() {
            return None;
        }
        let steps = crate::migration::apply::pushdown_steps(suffix)?;
        Some(crate::store::StepsFrom {
            from: expected,
            steps,
        })
    }
}

/// A Rust transform that a client did not register: its steps are known from
/// the ledger, but an entity below one cannot be migrated.
struct Missing {
    kind: String,
}

impl EntityMigration for Missing {
    fn kind(&self) -> &str {
        &self.kind
    }
    fn transform(&self, _: &Key, _: &mut Map) -> std::result::Result<bool, String> {
        Err("not registered with this client".to_owned())
    }
}

/// The lazy view of a whole store: every kind's chain.
#[derive(Debug, Clone, Default)]
pub struct Spec {
    /// Each kind's logical version.
    pub kinds: BTreeMap<String, Version>,
    chains: BTreeMap<String, Arc<KindChain>>,
    /// Former names of pending kind renames, with the kind's name now.
    renamed_away: BTreeMap<String, String>,
}

impl Spec {
    /// Builds the view from tern's state document. `code` holds the Rust
    /// transforms the caller registered (by migration number).
    ///
    /// # Errors
    /// A ledger entry whose text does not parse (the store was edited).
    pub fn from_state(doc: &StateDoc, code: &BTreeMap<u32, Migration>) -> Result<Spec> {
        let mut set = MigrationSet::new();
        let mut missing_code = BTreeMap::new();
        for entry in &doc.applied {
            let m = if entry.script.is_empty() {
                match code.get(&entry.id) {
                    Some(m) if m.checksum == entry.checksum => m.clone(),
                    _ => {
                        missing_code.insert(entry.id, entry.name.clone());
                        let kind = entry
                            .steps
                            .first()
                            .map(|(k, _)| k.clone())
                            .unwrap_or_default();
                        Migration::from_code(entry.id, &entry.name, "", Arc::new(Missing { kind }))
                    }
                }
            } else {
                Migration::from_script(
                    entry.id,
                    &entry.name,
                    &format!("ledger entry {}", entry.id),
                    &entry.script,
                )?
            };
            set.add(m)?;
        }
        let last = doc.applied.iter().map(|e| e.id).max().unwrap_or(0);
        let mut history = plan::history(&set, last);
        let mut pending = BTreeSet::new();
        // Kinds with a pending lazy migration, by their name now.
        let mut pending_kinds = BTreeSet::new();
        for (migration, kinds) in pending_lazy(doc) {
            pending.insert(migration);
            pending_kinds.extend(kinds);
        }
        let mut renamed_away = BTreeMap::new();
        for r in doc
            .renames
            .iter()
            .filter(|r| pending.contains(&r.migration))
        {
            if !doc.kinds.contains_key(&r.from) {
                renamed_away.insert(r.from.clone(), forward(doc, r.migration, &r.to));
            }
        }
        let mut chains = BTreeMap::new();
        for (kind, version) in &doc.kinds {
            let formers = pending_formers(doc, kind, &pending);
            chains.insert(
                kind.clone(),
                Arc::new(KindChain {
                    kind: kind.clone(),
                    version: *version,
                    pending: pending_kinds.contains(kind) || !formers.is_empty(),
                    formers,
                    steps: history.remove(kind).unwrap_or_default(),
                    missing_code: missing_code.clone(),
                    push: std::sync::OnceLock::new(),
                    reads: ReadBias::default(),
                }),
            );
        }
        Ok(Spec {
            kinds: doc.kinds.clone(),
            chains,
            renamed_away,
        })
    }

    /// The chain of `kind` (an untouched kind's when it has none).
    pub fn chain(&self, kind: &str) -> Arc<KindChain> {
        self.chains
            .get(kind)
            .cloned()
            .unwrap_or_else(|| Arc::new(KindChain::untouched(kind)))
    }

    /// Whether a migration touched `kind` (it has a chain of its own).
    pub fn has_chain(&self, kind: &str) -> bool {
        self.chains.contains_key(kind)
    }

    /// The logical version of `kind` (0 when no migration touched it).
    pub fn version(&self, kind: &str) -> Version {
        self.kinds.get(kind).copied().unwrap_or(0)
    }

    /// The name a pending lazy kind rename gave `kind`, if it was renamed away.
    pub fn renamed_to(&self, kind: &str) -> Option<&str> {
        self.renamed_away.get(kind).map(String::as_str)
    }

    /// The kinds with a pending lazy migration.
    pub fn pending_kinds(&self) -> Vec<&KindChain> {
        self.chains
            .values()
            .map(AsRef::as_ref)
            .filter(|c| c.pending)
            .collect()
    }
}

/// Each pending lazy migration (not recorded complete), oldest first, with
/// the kinds it steps or renames to under their names now.
pub(crate) fn pending_lazy(doc: &StateDoc) -> impl Iterator<Item = (u32, Vec<String>)> + '_ {
    doc.lazy
        .iter()
        .filter(|r| r.completed_at.is_none())
        .map(|r| {
            let kinds = r.kinds.keys().map(|k| forward(doc, r.migration, k));
            (r.migration, kinds.collect())
        })
}

/// `kind`, named as migration `after` left it, under its name now.
pub(crate) fn forward(doc: &StateDoc, after: u32, kind: &str) -> String {
    let mut name = kind.to_owned();
    for r in doc.renames.iter().filter(|r| r.migration > after) {
        if r.from == name {
            name.clone_from(&r.to);
        }
    }
    name
}

/// The former names of `kind` whose rename belongs to a pending lazy migration, newest first.
fn pending_formers(doc: &StateDoc, kind: &str, pending: &BTreeSet<u32>) -> Vec<String> {
    let mut current = kind.to_owned();
    let mut out = Vec::new();
    for r in doc.renames.iter().rev() {
        if r.to == current {
            if pending.contains(&r.migration) {
                out.push(r.from.clone());
            }
            current.clone_from(&r.from);
        }
    }
    out
}
