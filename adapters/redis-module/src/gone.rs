//! Keys under a kind's name now that leave without the module migrating them
//! first (their TTL expires, the server evicts them, a client the filter does
//! not see, such as a script or a `MULTI` block, deletes them): their copies
//! under the kind's former names are dropped, never moved in.
//!
//! Where the key under the name now holds the entity, a copy under a former
//! name is stale (the entity supersedes it) and the module drops it on the
//! next command that migrates the id; until then the fast path does not look
//! for it (docs/module.md). Were the key to leave first, the next read would
//! find it absent and move the stale copy in: an expired or deleted entity
//! would come back. So the module follows keyspace events (`expired`,
//! `evicted`, `del`) on entity keys of a pending kind with former names:
//! - the key is noted for the rest of the command that removed it
//!   ([`left_just_now`]): the notification arrives inside that command, also
//!   inside the module's own, whose first look at an expired key expires it;
//!   the migration then drops the copies instead of moving one in;
//! - a post-notification job drops the copies when the command's unit ends (a
//!   notification callback may not write), replicated to replicas and the AOF.
//!
//! Nothing is done on a replica (the primary's deletions arrive replicated) or
//! while the server loads its data.

use std::os::raw::c_void;
use std::sync::{Mutex, MutexGuard};

use crate::ffi::{self, Ctx};
use crate::loaded;
use crate::migrate::{self, Target};
use crate::reply::Reply;

/// The entities whose key under the kind's name now left in the current
/// execution unit.
static GONE: Mutex<Vec<Target>> = Mutex::new(Vec::new());

fn gone() -> MutexGuard<'static, Vec<Target>> {
    GONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Did `key` (under a kind's name now) leave in the current command?
pub(crate) fn left_just_now(key: &str) -> bool {
    gone().iter().any(|t| t.key == key)
}

/// Follows keyspace event `event` on `key`: an entity key of a pending kind
/// with former names that left is noted, and its copies' removal scheduled.
pub(crate) fn on_keyspace(ctx: Ctx, event: &[u8], key: &[u8]) {
    if !matches!(event, b"expired" | b"evicted" | b"del") {
        return;
    }
    if ffi::context_flags(ctx) & (ffi::CTX_REPLICA | ffi::CTX_LOADING) != 0 {
        return;
    }
    let (Some(cfg), Some(l)) = (loaded::config(), loaded::current()) else {
        return;
    };
    if ffi::selected_db(ctx) != cfg.db {
        return;
    }
    let Ok(key) = std::str::from_utf8(key) else {
        return;
    };
    let Some(t) = migrate::target(&cfg.wire, &l, key) else {
        return;
    };
    if t.via_former || l.spec.chain(&t.kind).formers.is_empty() {
        return;
    }
    let mut gone = gone();
    if gone.iter().any(|g| g.key == t.key) {
        return;
    }
    if gone.is_empty() && !ffi::add_post_notification_job(ctx, drop_copies) {
        ffi::log_warning(&format!(
            "tern: could not schedule dropping the former copies of {}: the next read may move one in",
            t.key
        ));
        return;
    }
    gone.push(t);
}

/// The post-notification job: drops the copies under former names of every
/// key noted since the last run.
extern "C" fn drop_copies(ctx: Ctx, _data: *mut c_void) {
    ffi::guard(
        || (),
        || {
            let targets = std::mem::take(&mut *gone());
            let (Some(cfg), Some(l)) = (loaded::config(), loaded::current()) else {
                return;
            };
            let db = ffi::selected_db(ctx);
            if db != cfg.db {
                ffi::select_db(ctx, cfg.db);
            }
            for t in &targets {
                let chain = l.spec.chain(&t.kind);
                for (old, tag) in migrate::former_copies(&cfg.wire, &chain, t) {
                    if let Reply::Error(e) =
                        ffi::call(ctx, "!E", "DEL", &[old.as_bytes(), tag.as_bytes()])
                    {
                        ffi::log_warning(&format!("tern: dropping {old}: {e}"));
                    }
                }
            }
            if db != cfg.db {
                ffi::select_db(ctx, db);
            }
        },
    );
}
