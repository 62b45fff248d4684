//! Clients the filter knows to be plain: listed by the server (not a script's or a
//! module's own client), not in a transaction, and in the store's database. The fast
//! path ([`fast`](crate::fast)) passes only their commands; a new spec forgets them all.

use std::collections::HashSet;
use std::sync::Mutex;

/// Clients known to be listed by the server (not a script's or a module's own
/// client), not in a transaction, and in the store's database: the filter asks the
/// server once per client (`RM_GetClientInfoById`, which costs a `getpeername`
/// syscall) and keeps the answer until the client sends a command that may change
/// it ([`forget_if_changing`]), disconnects, or a new spec is installed.
static PLAIN: Mutex<Option<HashSet<u64>>> = Mutex::new(None);

fn with_plain<R>(f: impl FnOnce(&mut HashSet<u64>) -> R) -> R {
    let mut g = match PLAIN.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(g.get_or_insert_with(HashSet::new))
}

/// Whether `client` is known plain (see [`PLAIN`]).
pub(crate) fn known_plain(client: u64) -> bool {
    client != 0 && with_plain(|s| s.contains(&client))
}

/// Records that the server said `client` is plain.
pub(crate) fn remember_plain(client: u64) {
    if client != 0 {
        with_plain(|s| s.insert(client));
    }
}

/// Forgets `client` (disconnected).
pub(crate) fn forget(client: u64) {
    with_plain(|s| s.remove(&client));
}

/// Forgets every client (a new spec: its state is asked again).
pub(crate) fn forget_all() {
    with_plain(HashSet::clear);
}

/// Before command `name` runs: forgets its client when the command may change what
/// [`PLAIN`] records (`MULTI`, `SELECT`, `RESET`, or another module's command, which
/// may select a database for its caller). `client` is asked only then.
pub(crate) fn forget_if_changing(name: &[u8], client: impl FnOnce() -> u64) {
    let changing = name.eq_ignore_ascii_case(b"multi")
        || name.eq_ignore_ascii_case(b"select")
        || name.eq_ignore_ascii_case(b"reset")
        || (name.contains(&b'.')
            && !name
                .get(..5)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"tern.")));
    if changing {
        forget(client());
    }
}
