//! redb panics on some corrupted files instead of returning an error
//! (`unreachable!` and unwraps while decoding its own pages). The embedded
//! store never lets such a panic out: every redb call runs inside
//! [`guarded`], which turns a panic into [`ErrorKind::InvalidData`] ("the
//! store file is corrupted"). A store that reported corruption is not used
//! further by tern (the command ends with the error); the state redb was in
//! when it panicked is not relied on, which is why asserting unwind safety is
//! sound here.
//!
//! The panic's own message is printed by the process's panic hook before
//! it is caught; [`quiet_panic_hook`] installs a hook that stays silent for
//! panics inside [`guarded`] (the CLI installs it; the error says it all).

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::store::{Error, ErrorKind, Result};

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a redb call), turning a panic into a "corrupted" error about `location`.
pub(super) fn guarded<T>(location: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let was = INSIDE.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    INSIDE.with(|c| c.set(was));
    result.unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned());
        Err(Error::new(
            ErrorKind::InvalidData,
            format!(
                "the store file is corrupted (redb failed reading it: {what}); restore it from a backup or an export"
            ),
        )
        .with_context("store", location.to_owned()))
    })
}

/// Installs a panic hook that prints nothing for a panic caught by the
/// embedded store (it becomes a "store file is corrupted" error) and defers
/// to the previous hook for every other panic. For binaries; call once.
pub fn quiet_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !INSIDE.with(Cell::get) {
            previous(info);
        }
    }));
}
