//! `tern abandon`: drop the record of an interrupted migration that wrote nothing.

use crate::opt::RunArgs;
use crate::{Ctx, EXIT_OK};

/// `tern abandon`: after a migration was interrupted before writing anything
/// (or failed on its first batch), drop its checkpoint so that its file can be
/// edited or removed. Refused (exit 1) once it has written entities: `tern up`
/// finishes it.
///
/// # Errors
/// The refusal, a held lock (exit 3), a store error.
pub async fn abandon(ctx: &Ctx) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let set = ctx.migrations().unwrap_or_default();
    let migrator = ctx.migrator(store, set, &RunArgs::default());
    let done = migrator.abandon().await?;
    if ctx.opt.json {
        crate::outln!("{}", serde_json::json!({"abandoned": done.migration}));
    } else {
        match done.migration {
            Some(id) => crate::outln!(
                "abandoned the interrupted run of migration {id}: it wrote nothing; its file may now change, and `tern up` starts it afresh"
            ),
            None => crate::outln!("no migration is in progress; nothing to abandon"),
        }
    }
    Ok(EXIT_OK)
}
