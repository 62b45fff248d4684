//! `TERN.DECLARE kind version`: the versions a client's code was written for.
//! A client that declared an older version of a kind than the store's is
//! refused on that kind (an error reply naming both versions), from the
//! declaration on and after every later install; undeclared clients are
//! treated as current (the module cannot know what they expect).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tern_core::lazy::Spec;

static DECLARED: Mutex<Option<HashMap<u64, BTreeMap<String, u64>>>> = Mutex::new(None);
/// Some client declared something (the filter's fast path skips the lookup otherwise).
static ANY: AtomicBool = AtomicBool::new(false);

fn with<R>(f: impl FnOnce(&mut HashMap<u64, BTreeMap<String, u64>>) -> R) -> R {
    let mut g = match DECLARED.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(g.get_or_insert_with(HashMap::new))
}

/// Why `client` may not touch `kind` (its declaration differs from the store), if so.
pub fn refusal(spec: &Spec, kind: &str, declared: u64) -> Option<String> {
    let now = spec.version(kind);
    if declared < now {
        Some(format!(
            "TERNOUTDATED this client declared kind {kind} at version {declared}, the store is at \
             version {now}: deploy the client code written for version {now} (TERN.DECLARE {kind} {now})"
        ))
    } else if declared > now {
        Some(format!(
            "TERNAHEAD this client declared kind {kind} at version {declared}, the store is at \
             version {now}: run `tern up` first"
        ))
    } else {
        None
    }
}

/// Records a declaration; refuses one that differs from the store.
///
/// # Errors
/// The refusal (the declaration is not recorded).
pub fn declare(spec: &Spec, client: u64, kind: &str, version: u64) -> Result<(), String> {
    if let Some(why) = refusal(spec, kind, version) {
        return Err(why);
    }
    with(|m| {
        m.entry(client)
            .or_default()
            .insert(kind.to_owned(), version)
    });
    ANY.store(true, Ordering::Relaxed);
    Ok(())
}

/// The version `client` declared for `kind`.
pub fn declared(client: u64, kind: &str) -> Option<u64> {
    if !ANY.load(Ordering::Relaxed) {
        return None;
    }
    with(|m| m.get(&client).and_then(|k| k.get(kind).copied()))
}

/// The kinds `client` declared below the store's versions (fenced).
pub fn outdated(spec: &Spec, client: u64) -> Vec<String> {
    if !ANY.load(Ordering::Relaxed) {
        return Vec::new();
    }
    with(|m| {
        m.get(&client)
            .map(|k| {
                k.iter()
                    .filter(|(kind, v)| **v < spec.version(kind))
                    .map(|(kind, _)| kind.clone())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// Whether any client declared versions.
pub fn any() -> bool {
    ANY.load(Ordering::Relaxed)
}

/// Forgets a disconnected client.
pub fn forget(client: u64) {
    if ANY.load(Ordering::Relaxed) {
        with(|m| m.remove(&client));
    }
}
