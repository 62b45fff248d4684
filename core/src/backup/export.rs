//! `tern export`: tern's state, then every entity sorted by kind then id.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use futures::TryStreamExt;

use super::BackupError;
use super::saved::{SavedState, saved_state};
use super::spill::Spill;
use crate::model::json::entity_to_json_line;
use crate::store::{Filter, Store, scan_pages};

/// How [`export`] runs.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// Write tern's state as the first line (when the store has any). Without
    /// it the export is the entity lines alone (as exports of earlier versions).
    pub state: bool,
    /// The bytes of entity lines an unordered kind keeps in memory before it
    /// sorts them into a temporary file ([`Spill`]).
    pub sort_memory: usize,
    /// Where the temporary files go (`None`: the system's, `TMPDIR`).
    pub sort_dir: Option<PathBuf>,
    /// Entities per scan page.
    pub page_size: usize,
}

impl Default for ExportOptions {
    /// With the state, 256 MiB of lines in memory, the system's temporary
    /// folder, pages of 1,000.
    fn default() -> ExportOptions {
        ExportOptions {
            state: true,
            sort_memory: 256 << 20,
            sort_dir: None,
            page_size: 1000,
        }
    }
}

/// What [`export`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Entities written, per kind.
    pub counts: BTreeMap<String, u64>,
    /// Whether the first line is tern's state.
    pub with_state: bool,
    /// Entity lines that went through temporary files (0: every kind fit in memory or was ordered).
    pub spilled: u64,
}

/// Writes tern's state (unless `options.state` is off or the store has none)
/// and then the entities of `kinds` (each once, sorted by kind then id) to
/// `out` as JSON Lines. `kinds` must be sorted and without repeats.
///
/// tern's state is read before the entities and again after them: when it
/// changed meanwhile (a migration ran), the export is refused rather than
/// mixing entities from before and after.
///
/// # Errors
/// [`BackupError::InProgress`] while a migration is in progress (with
/// `options.state`), [`BackupError::ChangedDuringExport`], store errors, and
/// write errors of `out` or of the temporary files ([`BackupError::Io`], whose
/// source is the `std::io::Error`, so a caller can tell a closed pipe).
pub async fn export(
    store: &dyn Store,
    kinds: &[String],
    out: &mut dyn Write,
    options: &ExportOptions,
) -> Result<ExportReport, BackupError> {
    let mut report = ExportReport::default();
    let before = if options.state {
        saved_state(store).await?
    } else {
        None
    };
    if let Some(saved) = &before {
        writeln!(out, "{}", saved.to_line()?).map_err(BackupError::io("writing the export"))?;
        report.with_state = true;
    }
    let ordered = store.features().scan_ordered;
    for kind in kinds {
        let mut spill =
            (!ordered).then(|| Spill::new(options.sort_memory, options.sort_dir.clone()));
        let mut n = 0u64;
        let mut pages = std::pin::pin!(scan_pages(
            store,
            kind,
            Filter::all(),
            options.page_size.max(1)
        ));
        while let Some(page) = pages
            .try_next()
            .await
            .map_err(BackupError::store(format!("scanning kind {kind}")))?
        {
            for e in &page.entities {
                let line = entity_to_json_line(e);
                match &mut spill {
                    Some(spill) => spill.push(&e.key, line).map_err(BackupError::io(
                        "writing a temporary file of the export's sort",
                    ))?,
                    None => {
                        writeln!(out, "{line}").map_err(BackupError::io("writing the export"))?;
                        n += 1;
                    }
                }
            }
        }
        if let Some(spill) = spill {
            report.spilled += spill.spilled();
            n = spill
                .finish(out)
                .map_err(BackupError::io("writing the export"))?;
        }
        report.counts.insert(kind.clone(), n);
    }
    if options.state {
        let after = saved_state(store).await?;
        if after.as_ref().map(strip_sweep_marks) != before.as_ref().map(strip_sweep_marks) {
            return Err(BackupError::ChangedDuringExport);
        }
    }
    Ok(report)
}

/// The state without what a sweep changes as it goes (a lazy migration
/// recorded complete by a sweep that ran during the export changes no entity's
/// meaning).
fn strip_sweep_marks(saved: &SavedState) -> SavedState {
    let mut s = saved.clone();
    for l in &mut s.lazy {
        l.completed = false;
    }
    s
}
