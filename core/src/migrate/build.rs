//! The `build` stage: a new kind filled by a join of existing kinds ([`crate::lang::build`]).
//!
//! Two phases, each checkpointed:
//!
//! 0. **check**: the new kind holds no entity (a build never overwrites data).
//! 1. **write**: every kind read is scanned, the rows are joined in memory, and the new kind's
//!    entities are written (version 0) in batches of the run's batch size. An unsafe build (two
//!    rows with the same key and cluster values but different `select` values) stops before
//!    any write, unless forced. Writes are unconditional puts of values computed from the
//!    sources, so a resumed run recomputes the same entities and rewrites them: no row is lost
//!    or duplicated.
//!
//! The join is held in memory: a build is meant for the column families of `tern advise`
//! (docs/language.md, "build").

use std::collections::BTreeMap;

use futures::TryStreamExt;

use super::error::{MigrateError, Result};
use super::run::{Position, Runner};
use crate::lang::Build;
use crate::lang::build::build_rows;
use crate::model::{Entity, Key, Map};
use crate::store::{Filter, Write, scan_pages};

/// The phases of a build stage (the `phase` of its checkpoint).
const CHECK: u32 = 0;
/// Joining and writing.
const WRITE: u32 = 1;

impl Runner<'_> {
    fn build_error(&self, text: &str, message: String) -> MigrateError {
        MigrateError::Invalid {
            id: self.migration,
            name: self.migration_name.to_owned(),
            message: format!("`{text}`: {message}"),
        }
    }

    /// Runs a build stage from `pos`.
    pub(crate) async fn run_build(
        &self,
        index: usize,
        b: &Build,
        text: &str,
        pos: &mut Position,
    ) -> Result<()> {
        if pos.phase == CHECK {
            self.check_continue()?;
            let held = self
                .store
                .count(&b.kind, Filter::all())
                .await
                .map_err(MigrateError::store("counting the kind a build fills"))?;
            if held > 0 {
                return Err(self.build_error(
                    text,
                    format!(
                        "the kind {} already holds {held} entities; a build fills a new kind (drop or rename the old one first)",
                        b.kind
                    ),
                ));
            }
            pos.phase = WRITE;
            pos.cursor = None;
            self.checkpoint(index, pos).await?;
        }
        let batch = self.options.batch_size.max(1);
        let mut data: BTreeMap<&str, Vec<Map>> = BTreeMap::new();
        for kind in b.sources() {
            let values = data.entry(kind).or_default();
            let mut pages = std::pin::pin!(scan_pages(self.store, kind, Filter::all(), batch));
            while let Some(page) = pages
                .try_next()
                .await
                .map_err(MigrateError::store("reading a kind a build joins"))?
            {
                self.check_continue()?;
                values.extend(page.entities.into_iter().map(|e| e.value));
            }
        }
        let built = build_rows(b, |kind| {
            data.get(kind)
                .map(|v| v.iter().collect())
                .unwrap_or_default()
        });
        if !built.conflicts.is_empty() && !self.options.force_unsafe {
            let first = built
                .conflicts
                .first()
                .map(ToString::to_string)
                .unwrap_or_default();
            return Err(self.build_error(
                text,
                format!(
                    "unsafe: {} pair(s) of rows share their key and cluster values but differ, so the result would depend on evaluation order; first: {first}. Add the ids of the kinds joined 1:N to `key` or `cluster`, or force it (--force-unsafe)",
                    built.conflicts.len()
                ),
            ));
        }
        if built.without_key > 0 {
            tracing::warn!(
                statement = text,
                rows = built.without_key,
                "join rows lacking a key property were not written"
            );
        }
        let mut entities = built.entities.into_iter().peekable();
        while entities.peek().is_some() {
            self.check_continue()?;
            let mut writes = Vec::with_capacity(batch);
            for (id, value) in entities.by_ref().take(batch) {
                let key = Key::new(b.kind.as_str(), id)
                    .map_err(|e| self.build_error(text, e.to_string()))?;
                writes.push(Write::Put(Entity::new(key, value)));
            }
            let n = writes.len() as u64;
            self.store
                .write_batch(writes)
                .await
                .map_err(MigrateError::store("writing the entities of a build"))?;
            pos.counts.processed += n;
            pos.counts.changed += n;
            self.report_checkpoint(pos);
        }
        Ok(())
    }
}
