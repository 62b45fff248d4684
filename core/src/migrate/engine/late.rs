//! `tern up` with nothing pending still brings late entities forward.
//!
//! Old application code may write entities of an old version after their
//! kind's last migration was applied. A run with a pending migration of that
//! kind sweeps them; with nothing pending, `tern up` does it here, so that
//! `tern verify`'s advice ("run `tern up`") is true.

use std::sync::Arc;

use super::{Migrator, Progress, RunMode};
use crate::migration::error::Result;
use crate::migration::lease::Lease;
use crate::migration::plan;
use crate::migration::state::StateDoc;
use crate::store::Store;

impl Migrator {
    /// Brings every entity below its kind's version forward (by the steps of
    /// the applied migrations), under the lease. Returns the kinds swept and
    /// how many entities each. Costs one count per versioned kind when
    /// nothing is late.
    pub(super) async fn sweep_late_writes(
        &self,
        store: &Arc<dyn Store>,
        doc: &StateDoc,
        mode: &RunMode<'_>,
    ) -> Result<Vec<(String, u64)>> {
        let mut late = Vec::new();
        for (kind, &version) in &doc.kinds {
            if version == 0 {
                continue;
            }
            let below = super::count_below(
                store.as_ref(),
                kind,
                version,
                "counting entities below their kind's version",
            )
            .await?;
            if below > 0 {
                late.push((kind.clone(), version, below));
            }
        }
        if late.is_empty() || mode.is_dry() {
            return Ok(late.into_iter().map(|(k, _, n)| (k, n)).collect());
        }
        let lease = Lease::acquire(Arc::clone(store), &self.lease).await?;
        let last = doc.applied.last().map_or(0, |e| e.id);
        let history = plan::history(&self.set, last);
        let progress: &dyn Progress = self.progress.as_ref();
        let runner = self.runner(
            store.as_ref(),
            (last, "late writes"),
            &lease,
            progress,
            &history,
        );
        let mut out = Vec::new();
        let mut result = Ok(());
        for (kind, version, _) in late {
            match self.sweep_below(&runner, &kind, version).await {
                Ok(n) => out.push((kind, n)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        drop(runner);
        if let Err(e) = lease.release().await {
            tracing::warn!(error = %e, "could not release the lease; it expires by itself");
        }
        result.map(|()| out)
    }
}
