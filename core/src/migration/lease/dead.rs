//! When the store proves that a lease's holder is gone, the lease need not
//! run out: a crashed `tern up` should not block the next one for a TTL.
//!
//! Proof is one of: the store is the embedded one and the holder was another
//! process (the embedded store admits one process at a time, so if this one
//! opened the file, the holder has exited); or the holder ran on this host
//! (same host name) and its process id no longer exists (checked in `/proc`,
//! so only on Linux). Anything else waits for the expiry as before.

use crate::migration::state::LeaseRecord;
use crate::store::Store;

/// Why `held` is known to be dead, or `None` when it may be alive.
pub(super) fn provably_dead(held: &LeaseRecord, store: &dyn Store) -> Option<String> {
    let (host, pid) = held.holder.rsplit_once(" pid ")?;
    let pid: u32 = pid.parse().ok()?;
    let (our_host, our_pid) = (super::host_name(), std::process::id());
    if pid == our_pid && host == our_host {
        return None;
    }
    if store.info().scheme == "embedded" {
        return Some(format!(
            "its process ({}) no longer has the embedded store open (one process at a time)",
            held.holder
        ));
    }
    if host == our_host && !process_exists(pid) {
        return Some(format!(
            "its process ({}) no longer runs on this host",
            held.holder
        ));
    }
    None
}

#[cfg(target_os = "linux")]
fn process_exists(pid: u32) -> bool {
    std::path::Path::new("/proc").join(pid.to_string()).exists()
}

#[cfg(not(target_os = "linux"))]
fn process_exists(_pid: u32) -> bool {
    // No portable check without unsafe code: assume it runs.
    true
}
