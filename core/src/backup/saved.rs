//! tern's state in an export: what it holds, reading it from a store and
//! restoring it into one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::BackupError;
use crate::migration::state::{
    self, KindRename, LazyRecord, LedgerEntry, RunCounts, STATE_FORMAT, StateDoc,
};
use crate::store::{Store, StoreExt};

/// The only field of an export's state line: `{"tern_state": {...}}`. An
/// entity line never has it (entity lines have `kind`, `id`, `version`, `value`).
pub const STATE_LINE_FIELD: &str = "tern_state";

/// The part of tern's state an export carries: what the store's data means,
/// not its history.
///
/// Carried: each kind's version, the ledger (each applied migration's number,
/// name, checksum, canonical script and version steps), the kind renames and
/// the lazy migrations (and whether each is complete or retired). Left out:
/// when things happened and what runs counted (two stores migrated alike
/// export alike, so exports still compare with `diff`; restored entries are
/// dated at the import), the lease and its fencing token, a sweep's checkpoint
/// (a new sweep starts from the beginning, which version scoping makes safe).
/// An export refuses while a migration is in progress ([`BackupError::InProgress`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedState {
    /// The format of the state document it came from.
    pub format: u32,
    /// The current version of each kind.
    pub kinds: BTreeMap<String, u64>,
    /// The ledger: applied migrations, in order.
    pub applied: Vec<SavedMigration>,
    /// Every kind rename, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub renames: Vec<SavedRename>,
    /// Every lazy migration installed, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lazy: Vec<SavedLazy>,
}

/// An applied migration, as an export carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedMigration {
    /// The migration number.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// `sha256:<hex>` of its normalized text.
    pub checksum: String,
    /// Its canonical script (empty for a migration written in Rust).
    pub script: String,
    /// The version steps it added, as `(kind, version after the step)`.
    pub steps: Vec<(String, u64)>,
}

/// A kind rename, as an export carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedRename {
    /// The migration that renames the kind.
    pub migration: u32,
    /// The old kind.
    pub from: String,
    /// The new kind.
    pub to: String,
}

/// An installed lazy migration, as an export carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedLazy {
    /// The migration.
    pub migration: u32,
    /// The kinds it steps or renames to, with their version after it.
    pub kinds: BTreeMap<String, u64>,
    /// A sweep recorded it complete.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub completed: bool,
    /// `tern gc` retired its spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retired: bool,
}

impl SavedMigration {
    /// What an export carries of `e`.
    fn of(e: &LedgerEntry) -> SavedMigration {
        SavedMigration {
            id: e.id,
            name: e.name.clone(),
            checksum: e.checksum.clone(),
            script: e.script.clone(),
            steps: e.steps.clone(),
        }
    }

    /// The ledger entry, applied at `now` (no duration, no counts).
    fn restored(&self, now: i64) -> LedgerEntry {
        LedgerEntry {
            id: self.id,
            name: self.name.clone(),
            checksum: self.checksum.clone(),
            applied_at: now,
            duration_ms: 0,
            counts: RunCounts::default(),
            script: self.script.clone(),
            steps: self.steps.clone(),
        }
    }
}

impl SavedRename {
    /// What an export carries of `r`.
    fn of(r: &KindRename) -> SavedRename {
        SavedRename {
            migration: r.migration,
            from: r.from.clone(),
            to: r.to.clone(),
        }
    }

    /// The rename, started at `now`.
    fn restored(&self, now: i64) -> KindRename {
        KindRename {
            migration: self.migration,
            from: self.from.clone(),
            to: self.to.clone(),
            started_at: now,
        }
    }
}

impl SavedLazy {
    /// What an export carries of `l`.
    fn of(l: &LazyRecord) -> SavedLazy {
        SavedLazy {
            migration: l.migration,
            kinds: l.kinds.clone(),
            completed: l.completed_at.is_some(),
            retired: l.retired_at.is_some(),
        }
    }

    /// The lazy record, installed (and completed, retired, as it was) at `now`.
    fn restored(&self, now: i64) -> LazyRecord {
        LazyRecord {
            migration: self.migration,
            installed_at: now,
            kinds: self.kinds.clone(),
            completed_at: self.completed.then_some(now),
            retired_at: self.retired.then_some(now),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateLine {
    tern_state: SavedState,
}

impl SavedState {
    /// The saved part of `doc`.
    pub fn of(doc: &StateDoc) -> SavedState {
        SavedState {
            format: doc.format.max(STATE_FORMAT),
            kinds: doc.kinds.clone(),
            applied: doc.applied.iter().map(SavedMigration::of).collect(),
            renames: doc.renames.iter().map(SavedRename::of).collect(),
            lazy: doc.lazy.iter().map(SavedLazy::of).collect(),
        }
    }

    /// Puts this state into `doc` (kinds, ledger, renames, lazy records),
    /// dating every record `now` (ms since the epoch).
    fn put_into(&self, doc: &mut StateDoc, now: i64) {
        doc.kinds = self.kinds.clone();
        doc.applied = self.applied.iter().map(|m| m.restored(now)).collect();
        doc.renames = self.renames.iter().map(|r| r.restored(now)).collect();
        doc.lazy = self.lazy.iter().map(|l| l.restored(now)).collect();
        doc.sweep = None;
    }

    /// No kind version, no ledger entry, no rename, no lazy migration: what a
    /// store no migration touched has.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
            && self.applied.is_empty()
            && self.renames.is_empty()
            && self.lazy.is_empty()
    }

    /// The export's first line (without its newline).
    ///
    /// # Errors
    /// [`BackupError::StateRefused`] if it cannot be serialized (it always can).
    pub fn to_line(&self) -> Result<String, BackupError> {
        serde_json::to_string(&StateLine {
            tern_state: self.clone(),
        })
        .map_err(|e| BackupError::StateRefused(format!("cannot write tern's state: {e}")))
    }

    /// Whether `text` (one line of an import file) is a state line: an object
    /// whose first field is [`STATE_LINE_FIELD`].
    pub fn is_state_line(text: &str) -> bool {
        text.trim_start()
            .strip_prefix('{')
            .map(str::trim_start)
            .is_some_and(|rest| rest.starts_with("\"tern_state\""))
    }

    /// The state of a state line.
    ///
    /// # Errors
    /// [`BackupError::Line`] naming what is wrong with it, or a format newer
    /// than this build reads.
    pub fn from_line(text: &str) -> Result<SavedState, BackupError> {
        let line: StateLine = serde_json::from_str(text).map_err(|e| {
            BackupError::Line(format!(
                "tern's state record (the first line of an export) is not valid: {e}"
            ))
        })?;
        if line.tern_state.format > STATE_FORMAT {
            return Err(BackupError::Line(format!(
                "tern's state record was written by a newer tern (format {}, this build reads up to \
                 {STATE_FORMAT}); import it with that version",
                line.tern_state.format
            )));
        }
        Ok(line.tern_state)
    }
}

/// The state an export of `store` carries: `None` when no migration ever
/// touched the store (the export is then entity lines only, as before).
///
/// # Errors
/// [`BackupError::InProgress`] while a migration runs or after one was
/// interrupted; store errors.
pub async fn saved_state(store: &dyn Store) -> Result<Option<SavedState>, BackupError> {
    let doc = state::load(store).await?.doc;
    if let Some(run) = &doc.running {
        return Err(BackupError::InProgress {
            migration: run.migration,
            stage: run.stage,
        });
    }
    let saved = SavedState::of(&doc);
    Ok((!saved.is_empty()).then_some(saved))
}

/// What [`restore_state`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoredState {
    /// The store had no state and no entity: it now has the file's state.
    Written,
    /// The store already had exactly this state (an import run again).
    Matched,
}

/// Puts `saved` into `store` as its state.
///
/// Only into a store that has no state and no entity, or that has exactly
/// this state already (an import of the same file run again after it stopped
/// part-way): tern's state says what the data means, and mixing two stores'
/// states would make tern migrate entities that are already migrated, or
/// never migrate others.
///
/// # Errors
/// [`BackupError::StateRefused`] with the reason and what to do; store errors.
pub async fn restore_state(
    store: &dyn Store,
    saved: &SavedState,
) -> Result<RestoredState, BackupError> {
    let current = state::load(store).await?;
    let mut have = SavedState::of(&current.doc);
    have.format = saved.format;
    if let Some(run) = &current.doc.running {
        return Err(BackupError::StateRefused(format!(
            "the file carries tern's state, and this store has migration {} in progress: tern's state \
             can only be restored into an empty store; import into a new store, or with `--no-state` \
             to import the entities alone",
            run.migration
        )));
    }
    if have == *saved {
        return Ok(RestoredState::Matched);
    }
    if !have.is_empty() {
        return Err(BackupError::StateRefused(format!(
            "the file carries tern's state, and this store has another ({}): tern's state can only be \
             restored into an empty store or one with the same state; import into a new store, or \
             with `--no-state` to import the entities alone (checked against this store's versions)",
            difference(&have, saved)
        )));
    }
    let kinds = store
        .kinds()
        .await
        .map_err(BackupError::store("listing the store's kinds"))?;
    if !kinds.is_empty() {
        let shown: Vec<&str> = kinds.iter().take(5).map(String::as_str).collect();
        return Err(BackupError::StateRefused(format!(
            "the file carries tern's state, and this store already holds entities (kinds {}{}) with no \
             state of tern: their versions would be read against the file's; import into a new store, \
             or with `--no-state` to import the entities alone",
            shown.join(", "),
            if kinds.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        )));
    }
    let mut doc = current.doc.clone();
    let now = store
        .now()
        .await
        .map_err(BackupError::store("reading the store's clock"))?;
    saved.put_into(&mut doc, now);
    match state::store_if(store, current.revision, &doc).await? {
        Some(_) => Ok(RestoredState::Written),
        None => Err(BackupError::StateRefused(
            "tern's state changed while the import restored it (another tern ran on this store); \
             run the import again"
                .to_owned(),
        )),
    }
}

/// How `have` (the store's) differs from `want` (the file's), for a person.
fn difference(have: &SavedState, want: &SavedState) -> String {
    let ids = |s: &SavedState| {
        s.applied
            .iter()
            .map(|e| e.id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if have
        .applied
        .iter()
        .map(|e| e.id)
        .ne(want.applied.iter().map(|e| e.id))
    {
        return format!(
            "the store has applied migrations [{}], the file [{}]",
            ids(have),
            ids(want)
        );
    }
    if have.applied != want.applied {
        return "the same migrations, with other checksums or records".to_owned();
    }
    if have.kinds != want.kinds {
        let differ: Vec<String> = have
            .kinds
            .keys()
            .chain(want.kinds.keys())
            .filter(|k| have.kinds.get(*k) != want.kinds.get(*k))
            .take(5)
            .map(|k| {
                let show = |v: Option<&u64>| v.map_or("none".to_owned(), u64::to_string);
                format!(
                    "kind {k} at version {} in the store, {} in the file",
                    show(have.kinds.get(k)),
                    show(want.kinds.get(k))
                )
            })
            .collect();
        return differ.join("; ");
    }
    if have.renames != want.renames {
        return "other kind renames".to_owned();
    }
    "other lazy migrations, or a lazy migration completed in one and not the other".to_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_state_line_reads_back_and_an_entity_line_is_not_one() {
        let mut saved = SavedState::of(&StateDoc::default());
        saved.kinds.insert("user".to_owned(), 4);
        let line = saved.to_line().unwrap();
        assert!(line.starts_with("{\"tern_state\":"));
        assert!(SavedState::is_state_line(&line));
        assert_eq!(SavedState::from_line(&line).unwrap(), saved);
        assert!(!SavedState::is_state_line(
            r#"{"kind":"tern_state","id":1,"value":{}}"#
        ));
        let newer = line.replacen("\"format\":1", "\"format\":99", 1);
        assert!(
            SavedState::from_line(&newer)
                .unwrap_err()
                .to_string()
                .contains("newer tern")
        );
        assert!(SavedState::from_line(r#"{"tern_state":{},"x":1}"#).is_err());
    }
}
