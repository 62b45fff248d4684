//! The lease lock: one runner at a time, with expiry, renewal and fencing.
//!
//! The lease lives in tern's state document (see [`super::state`]). Acquiring
//! it hands out a fencing token larger than every earlier one. Every write of
//! the state document by the holder (checkpoints, ledger, renewals) is a
//! compare-and-set on the document's revision, so once another runner has
//! taken the lease over (after it expired) the old holder's next write fails
//! and it stops: it can never write a stale checkpoint.
//!
//! Expiry is judged by [`StoreExt::now`](crate::store::StoreExt::now): the server's clock where the store has
//! one, else this machine's (runners on several machines then need clocks
//! that agree to within a fraction of the TTL).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;

use super::error::{MigrateError, Result};
use super::fenced::{self, Fence};
use super::state::{self, LeaseRecord, StateDoc, Versioned};
use crate::store::{Store, StoreExt, Write, WriteOutcome};

/// How to take the lease.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// How long the lease lasts without renewal. Renewed every third of it.
    pub ttl: Duration,
    /// How long to wait for a held lease before giving up (`None`: do not wait).
    pub wait: Option<Duration>,
    /// Renew in the background (always, except in tests that simulate a stalled runner).
    pub renew: bool,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        LeaseOptions {
            ttl: Duration::from_secs(30),
            wait: None,
            renew: true,
        }
    }
}

mod dead;

/// Who is running this process, for people reading `tern lock`.
pub(crate) fn holder() -> String {
    format!("{} pid {}", host_name(), std::process::id())
}

/// This host's name, as recorded in a lease's holder.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

struct Shared {
    store: Arc<dyn Store>,
    owner: String,
    token: u64,
    ttl_ms: i64,
    current: Mutex<Versioned>,
    lost: AtomicBool,
    /// Tells the renewer to stop between renewals (never in the middle of one).
    stop: Notify,
}

/// A held lease. Release it with [`Lease::release`] on every exit path; if the
/// process dies instead, the lease expires after its TTL.
pub struct Lease {
    shared: Arc<Shared>,
    renewer: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("owner", &self.shared.owner)
            .field("token", &self.shared.token)
            .finish_non_exhaustive()
    }
}

fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis())
        .unwrap_or(i64::MAX / 4)
        .max(1)
}

impl Lease {
    /// Takes the lease, waiting up to `options.wait` while another runner holds it.
    ///
    /// # Errors
    /// [`MigrateError::LockHeld`] when it is held (and waiting ran out), or a store error.
    pub async fn acquire(store: Arc<dyn Store>, options: &LeaseOptions) -> Result<Lease> {
        let owner = uuid::Uuid::new_v4().to_string();
        let ttl = ttl_ms(options.ttl);
        let deadline = options.wait.map(|w| tokio::time::Instant::now() + w);
        loop {
            let Versioned { mut doc, revision } = state::load(store.as_ref()).await?;
            let now = store
                .now()
                .await
                .map_err(MigrateError::store("reading the clock"))?;
            let dead = doc
                .lease
                .as_ref()
                .and_then(|held| dead::provably_dead(held, store.as_ref()));
            match &doc.lease {
                Some(held) if held.expires_at > now && dead.is_none() => {
                    let err = MigrateError::LockHeld {
                        owner: held.holder.clone(),
                        token: held.token,
                        expires_in_ms: held.expires_at - now,
                    };
                    match deadline {
                        Some(d) if tokio::time::Instant::now() < d => {
                            let pause =
                                Duration::from_millis(200).min(d - tokio::time::Instant::now());
                            tokio::time::sleep(pause).await;
                            continue;
                        }
                        _ => return Err(err),
                    }
                }
                previous => {
                    if let (Some(held), Some(why)) = (previous, &dead)
                        && held.expires_at > now
                    {
                        tracing::warn!(
                            holder = %held.holder,
                            token = held.token,
                            "taking over the lease at once: {why}"
                        );
                    }
                    if let Some(expired) = previous.as_ref().filter(|h| h.expires_at <= now) {
                        tracing::warn!(
                            holder = %expired.holder,
                            token = expired.token,
                            "taking over an expired lease; the previous runner stopped without releasing it"
                        );
                    }
                }
            }
            let token = doc.next_token.max(1);
            doc.next_token = token + 1;
            doc.lease = Some(LeaseRecord {
                owner: owner.clone(),
                token,
                holder: holder(),
                acquired_at: now,
                expires_at: now.saturating_add(ttl),
            });
            if let Some(rev) = state::store_if(store.as_ref(), revision, &doc).await? {
                tracing::debug!(token, "lease acquired");
                let shared = Arc::new(Shared {
                    store,
                    owner,
                    token,
                    ttl_ms: ttl,
                    current: Mutex::new(Versioned {
                        doc,
                        revision: Some(rev),
                    }),
                    lost: AtomicBool::new(false),
                    stop: Notify::new(),
                });
                let renewer = options
                    .renew
                    .then(|| tokio::spawn(renew_loop(Arc::clone(&shared))));
                return Ok(Lease { shared, renewer });
            }
            // Someone wrote meanwhile: look again.
        }
    }

    /// This lease's fencing token.
    pub fn token(&self) -> u64 {
        self.shared.token
    }

    /// How long the lease lasts without renewal (`[lease] ttl_ms`).
    pub fn ttl(&self) -> Duration {
        Duration::from_millis(u64::try_from(self.shared.ttl_ms).unwrap_or(1))
    }

    /// Has the lease been lost (taken over, or renewal failed past expiry)?
    pub fn is_lost(&self) -> bool {
        self.shared.lost.load(Ordering::SeqCst)
    }

    /// The state document as last read or written by this holder.
    pub async fn snapshot(&self) -> StateDoc {
        self.shared.current.lock().await.doc.clone()
    }

    /// Changes the state document under the lease (fenced compare-and-set).
    ///
    /// When someone else wrote the document meanwhile (a worker's partition
    /// checkpoint), it is read again and, while its lease is still this one
    /// (same owner and fencing token), `change` is applied to it again: the
    /// lease, not the revision, is the fence, as in a KCL lease table.
    ///
    /// # Errors
    /// [`MigrateError::LeaseLost`] when another runner took the lease over (or
    /// it was released by force), or a store error.
    pub async fn update<T>(&self, change: impl FnMut(&mut StateDoc) -> T) -> Result<T> {
        let mut current = self.shared.current.lock().await;
        fenced::update(
            self.shared.store.as_ref(),
            &*self.shared,
            &mut current,
            change,
        )
        .await
    }

    /// Applies `writes` and changes the state document under the lease with one
    /// [`StoreExt::write_checked_with_meta`](crate::store::StoreExt::write_checked_with_meta) call: `change` also gets the outcome of
    /// each write, so that the document records exactly what the writes did.
    /// Where the store's call is atomic ([`AtomicBatchWithMeta`](crate::store::AtomicBatchWithMeta)),
    /// the writes and the document are committed together or not at all.
    /// A document someone else wrote meanwhile is read again, as in
    /// [`Lease::update`]: an atomic store then wrote nothing and the call is
    /// made again; another store applied the writes and only the document is
    /// written again.
    ///
    /// # Errors
    /// [`MigrateError::LeaseLost`] when another runner took the lease over
    /// (an atomic store then applied none of the writes; another store applied
    /// them, which version scoping makes harmless), or a store error.
    pub async fn write_and_update<F>(
        &self,
        writes: Vec<Write>,
        change: F,
    ) -> Result<Vec<WriteOutcome>>
    where
        F: Fn(&mut StateDoc, &[WriteOutcome]) + Send + Sync + 'static,
    {
        let store = self.shared.store.as_ref();
        let mut current = self.shared.current.lock().await;
        fenced::write_and_update(store, &*self.shared, &mut current, writes, Arc::new(change)).await
    }

    /// Releases the lease. A lease another runner holds now is left to it.
    ///
    /// The renewer is stopped between two renewals and awaited first: a
    /// renewal cancelled in flight could still land on the server after its
    /// answer was dropped, and the release would then miss it and leave the
    /// lease held until it expired. A conflicting write is re-read: the lease
    /// is removed as long as its record is still this holder's.
    ///
    /// # Errors
    /// A store error (the lease then expires by itself).
    pub async fn release(mut self) -> Result<()> {
        if let Some(task) = self.renewer.take() {
            self.shared.stop.notify_one();
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "the lease renewer ended abnormally");
            }
        }
        let store = self.shared.store.as_ref();
        let owner = &self.shared.owner;
        for _ in 0..RELEASE_ATTEMPTS {
            let Versioned { mut doc, revision } = state::load(store).await?;
            if doc.lease.as_ref().is_none_or(|l| &l.owner != owner) {
                return Ok(());
            }
            doc.lease = None;
            if state::store_if(store, revision, &doc).await?.is_some() {
                self.shared.lost.store(true, Ordering::SeqCst);
                return Ok(());
            }
        }
        tracing::warn!(
            token = self.shared.token,
            "the state document kept changing while releasing the lease; it expires by itself"
        );
        Ok(())
    }
}

/// How often [`Lease::release`] re-reads a state document that changed under it.
const RELEASE_ATTEMPTS: usize = 8;

/// How often one renewal re-reads a state document others keep writing
/// before it waits for the next period.
const RENEW_ATTEMPTS: usize = 64;

/// Is `doc`'s lease still the one of `shared` (same owner, same fencing token)?
fn holds(shared: &Shared, doc: &StateDoc) -> bool {
    doc.lease
        .as_ref()
        .is_some_and(|l| l.owner == shared.owner && l.token == shared.token)
}

/// The runner's lease fences the state document; its copy is the one the
/// runner keeps up to date.
impl Fence for Shared {
    const RELOAD: bool = false;

    fn holds(&self, doc: &StateDoc) -> bool {
        holds(self, doc)
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    fn lose(&self) -> MigrateError {
        self.lost.store(true, Ordering::SeqCst);
        MigrateError::LeaseLost { token: self.token }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(task) = self.renewer.take() {
            task.abort();
        }
    }
}

/// The background renewers' wait for their next turn (the runner's lease, a
/// worker's partition lease): a third of `ttl_ms` (at least 10 ms), then the
/// store's clock. A clock that cannot be read is reported to `clock_failed`
/// and read again a period later. `None` when the renewer is to end: `stop`
/// was notified, or `lost` set meanwhile.
pub(crate) async fn next_renewal(
    store: &dyn Store,
    ttl_ms: i64,
    (stop, lost): (&Notify, &AtomicBool),
    clock_failed: impl Fn(&crate::store::Error),
) -> Option<i64> {
    let period = Duration::from_millis(u64::try_from(ttl_ms / 3).unwrap_or(1000).max(10));
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = stop.notified() => return None,
        }
        if lost.load(Ordering::SeqCst) {
            return None;
        }
        match store.now().await {
            Ok(now) => return Some(now),
            Err(e) => clock_failed(&e),
        }
    }
}

async fn renew_loop(shared: Arc<Shared>) {
    loop {
        let wake = (&shared.stop, &shared.lost);
        let Some(now) = next_renewal(shared.store.as_ref(), shared.ttl_ms, wake, |e| {
            tracing::warn!(error = %e, "cannot read the clock to renew the lease; retrying");
            crate::telemetry::retry("lease_renewal", 1);
        })
        .await
        else {
            return;
        };
        let mut current = shared.current.lock().await;
        let expired = current
            .doc
            .lease
            .as_ref()
            .is_none_or(|l| l.expires_at <= now);
        let mut outcome = Ok(None);
        // Another writer's change (a worker's checkpoint) is read and renewed
        // over, as long as the lease is still ours.
        for _ in 0..RENEW_ATTEMPTS {
            if !holds(&shared, &current.doc) {
                outcome = Ok(None);
                break;
            }
            let mut doc = current.doc.clone();
            if let Some(lease) = doc.lease.as_mut() {
                lease.expires_at = now.saturating_add(shared.ttl_ms);
            }
            outcome = match state::store_or_current(shared.store.as_ref(), current.revision, &doc)
                .await
            {
                Ok(Ok(rev)) => Ok(Some((doc, rev))),
                Ok(Err(seen)) => {
                    *current = seen;
                    continue;
                }
                Err(e) => Err(e),
            };
            break;
        }
        match outcome {
            Ok(Some((doc, rev))) => {
                *current = Versioned {
                    doc,
                    revision: Some(rev),
                };
                crate::telemetry::lease_renewed();
                if expired {
                    tracing::warn!(
                        "the lease had expired before it could be renewed; nobody took it over meanwhile"
                    );
                }
            }
            Ok(None) => {
                tracing::error!(
                    token = shared.token,
                    "lease lost: another runner took it over"
                );
                shared.lost.store(true, Ordering::SeqCst);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "lease renewal failed; retrying");
                crate::telemetry::retry("lease_renewal", 1);
                if expired {
                    shared.lost.store(true, Ordering::SeqCst);
                    tracing::error!(
                        token = shared.token,
                        "lease expired while renewal kept failing; stopping"
                    );
                    return;
                }
            }
        }
    }
}

/// Removes the lease record if it has expired (or, with `force`, whoever holds it).
/// Returns the lease that was removed.
///
/// # Errors
/// [`MigrateError::LockHeld`] when it is held and not expired and `force` is
/// false, or a store error.
pub async fn release_stale(store: &dyn Store, force: bool) -> Result<Option<LeaseRecord>> {
    loop {
        let Versioned { mut doc, revision } = state::load(store).await?;
        let now = store
            .now()
            .await
            .map_err(MigrateError::store("reading the clock"))?;
        let Some(lease) = doc.lease.clone() else {
            return Ok(None);
        };
        if lease.expires_at > now && !force {
            return Err(MigrateError::LockHeld {
                owner: lease.holder,
                token: lease.token,
                expires_in_ms: lease.expires_at - now,
            });
        }
        doc.lease = None;
        if state::store_if(store, revision, &doc).await?.is_some() {
            return Ok(Some(lease));
        }
    }
}
