//! `tern import`: reading an export's lines, restoring tern's state first.

use std::collections::BTreeMap;

use super::BackupError;
use super::saved::{RestoredState, SavedState, restore_state};
use crate::lazy::{RenamedAway, renamed_away};
use crate::migration::state::{self, StateDoc};
use crate::model::Entity;
use crate::model::json::entity_from_json_line;
use crate::store::Store;

/// How an [`Importer`] treats a file's state line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Skip a state line (`--no-state`): import the entities alone, checked
    /// against the store's own state, as files without one are.
    pub ignore_state: bool,
}

/// What one line of an import file is.
#[derive(Debug, Clone, PartialEq)]
pub enum ImportLine {
    /// An entity to write.
    Entity(Entity),
    /// tern's state, restored into the store (or already there).
    State(RestoredState),
    /// A state line skipped ([`ImportOptions::ignore_state`]).
    StateIgnored,
    /// A blank line.
    Blank,
}

/// Reads an import file line by line: the state line first (restored with
/// [`restore_state`]), then entities checked against the kinds' versions.
#[derive(Debug)]
pub struct Importer {
    options: ImportOptions,
    kind_versions: BTreeMap<String, u64>,
    renamed_away: Vec<RenamedAway>,
    /// The file's state is the store's: entities under a former name of a
    /// lazy rename still pending are the export's own, which reads and the
    /// sweep migrate.
    restored: bool,
}

impl Importer {
    /// An importer for `store`, reading its state.
    ///
    /// # Errors
    /// The store's state cannot be read.
    pub async fn new(store: &dyn Store, options: ImportOptions) -> Result<Importer, BackupError> {
        let doc = state::load(store).await?.doc;
        Ok(Importer::with_state(&doc, options, false))
    }

    fn with_state(doc: &StateDoc, options: ImportOptions, restored: bool) -> Importer {
        Importer {
            options,
            kind_versions: doc.kinds.clone(),
            renamed_away: renamed_away(doc),
            restored,
        }
    }

    /// The line `line_no` (1-based) of the file, its bytes `raw` (with or
    /// without its newline). A state line on line 1 is restored into `store`
    /// before anything else is written.
    ///
    /// # Errors
    /// [`BackupError::Line`] for a line that is not valid UTF-8, not an entity,
    /// holds a version above its kind's, names a kind renamed away, or a state
    /// line after line 1; [`BackupError::StateRefused`] for a state the store
    /// cannot take; store errors.
    pub async fn line(
        &mut self,
        store: &dyn Store,
        raw: &[u8],
        line_no: u64,
    ) -> Result<ImportLine, BackupError> {
        let text = std::str::from_utf8(raw).map_err(|e| {
            BackupError::Line(format!(
                "column {}: not valid UTF-8",
                String::from_utf8_lossy(&raw[..e.valid_up_to()])
                    .chars()
                    .count()
                    + 1
            ))
        })?;
        // A byte-order mark (editors on Windows write one) is not part of the data.
        let text = if line_no == 1 {
            text.strip_prefix('\u{feff}').unwrap_or(text)
        } else {
            text
        };
        let text = text.trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            return Ok(ImportLine::Blank);
        }
        if SavedState::is_state_line(text) {
            if line_no != 1 {
                return Err(BackupError::Line(
                    "tern's state record may only be the first line of a file (where `tern export` \
                     writes it); remove it, or import the files one by one"
                        .to_owned(),
                ));
            }
            if self.options.ignore_state {
                return Ok(ImportLine::StateIgnored);
            }
            let saved = SavedState::from_line(text)?;
            let restored = restore_state(store, &saved).await?;
            let doc = state::load(store).await?.doc;
            *self = Importer::with_state(&doc, self.options, true);
            return Ok(ImportLine::State(restored));
        }
        let entity = entity_from_json_line(text).map_err(|e| BackupError::Line(e.to_string()))?;
        self.check(&entity)?;
        Ok(ImportLine::Entity(entity))
    }

    /// Refuses an entity tern would never migrate: under a renamed kind's
    /// former name, or above its kind's version.
    fn check(&self, entity: &Entity) -> Result<(), BackupError> {
        if let Some(r) = self
            .renamed_away
            .iter()
            .find(|r| r.former == entity.key.kind && !(self.restored && r.pending))
        {
            return Err(BackupError::Line(format!(
                "kind {} was renamed to {} by migration {}: an entity under the former name is never migrated; \
                 import it as kind {} (with the version its value has)",
                r.former, r.now, r.migration, r.now
            )));
        }
        let kind_version = self
            .kind_versions
            .get(&entity.key.kind)
            .copied()
            .unwrap_or(0);
        if entity.version > kind_version {
            return Err(BackupError::Line(format!(
                "version {} is above kind {}'s version {kind_version}: tern would never migrate it; \
                 give the version the data really has (0 if unsure, and `tern up` migrates it), or \
                 import into a new store the whole export of the store it came from (its first line \
                 carries tern's state)",
                entity.version, entity.key.kind
            )));
        }
        Ok(())
    }
}
