//! The lease: refusal while held, expiry and fencing, renewal, waiting, and
//! release (also through tern-testkit's store interceptor).
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tern_core::migrate::lease::{Lease, LeaseOptions, release_stale};
use tern_core::migrate::{MigrateError, state};
use tern_core::store::Store;
use tern_core::store::memory::MemoryStore;

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

fn opts(ttl_ms: u64, renew: bool) -> LeaseOptions {
    LeaseOptions {
        ttl: Duration::from_millis(ttl_ms),
        wait: None,
        renew,
    }
}

/// Acquires the lease of `s` for `ttl_ms`, renewed or not.
async fn acquire(s: &Arc<dyn Store>, ttl_ms: u64, renew: bool) -> Result<Lease, MigrateError> {
    Lease::acquire(Arc::clone(s), &opts(ttl_ms, renew)).await
}

/// A runner that lost its lease writes neither its checkpoint nor, on a
/// store that commits them together, the batch that goes with it; on a
/// store that makes two calls the batch lands (harmless: each write is a
/// compare-and-set or, here, idempotent) but the checkpoint does not.
#[tokio::test]
async fn a_fenced_batch_is_not_written_where_it_commits_with_its_checkpoint() {
    use tern_core::model::{Entity, Key, Map};
    use tern_core::store::{Write, WriteOutcome};
    use tern_testkit::intercept::{Intercepted, TwoCalls};

    let post = |id: i64| Entity::new(Key::new("post", id).unwrap(), Map::new());
    for atomic in [true, false] {
        let s: Arc<dyn Store> = if atomic {
            store()
        } else {
            Arc::new(Intercepted::new(store(), TwoCalls))
        };
        assert_eq!(s.features().atomic_batch_with_meta.is_some(), atomic);
        let a = acquire(&s, 50, false).await.unwrap();
        let out = a
            .write_and_update(vec![Write::Put(post(1))], |doc, outcomes| {
                doc.kinds.insert("written".into(), outcomes.len() as u64);
            })
            .await
            .unwrap();
        assert_eq!(out, vec![WriteOutcome::Applied]);
        let doc = state::load(s.as_ref()).await.unwrap().doc;
        assert_eq!(doc.kinds.get("written"), Some(&1), "atomic {atomic}");
        assert_eq!(a.snapshot().await, doc, "the holder's copy is current");

        tokio::time::sleep(Duration::from_millis(80)).await;
        let b = acquire(&s, 10_000, true).await.unwrap();
        let err = a
            .write_and_update(vec![Write::Put(post(2))], |doc, _| {
                doc.kinds.insert("stale".into(), 1);
            })
            .await
            .unwrap_err();
        assert!(matches!(err, MigrateError::LeaseLost { .. }), "{err}");
        assert!(a.is_lost());
        let doc = state::load(s.as_ref()).await.unwrap().doc;
        assert!(!doc.kinds.contains_key("stale"), "atomic {atomic}");
        assert_eq!(
            s.get(&post(2).key).await.unwrap().is_some(),
            !atomic,
            "the fenced batch is written only where it is a call of its own (atomic {atomic})"
        );
        b.release().await.unwrap();
    }
}

/// A renewal whose write lands on the server while its answer is still on
/// the way, released in that moment: the lease must still be gone
/// afterwards (a renewer cancelled mid-write left it held until expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_during_a_slow_renewal_leaves_no_lease_behind() {
    use std::sync::atomic::AtomicUsize;
    use tern_core::store::{MetaCas, MetaChange, Result as StoreResult};
    use tern_testkit::intercept::{Intercept, Intercepted};

    /// Answers every metadata write 40 ms after it was applied, once armed.
    #[derive(Debug, Default)]
    struct SlowAnswers {
        armed: AtomicBool,
        landed: AtomicUsize,
    }
    #[async_trait::async_trait]
    impl Intercept for SlowAnswers {
        async fn meta_cas(
            &self,
            inner: &dyn Store,
            name: &str,
            change: MetaChange<'_>,
        ) -> StoreResult<MetaCas> {
            let r = inner.meta_cas(name, change).await;
            if self.armed.load(Ordering::SeqCst) {
                self.landed.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            r
        }
    }

    for _ in 0..5 {
        let s = Arc::new(Intercepted::new(store(), SlowAnswers::default()));
        let dyn_s: Arc<dyn Store> = Arc::clone(&s) as Arc<dyn Store>;
        let a = acquire(&dyn_s, 60, true).await.unwrap();
        s.hooks().armed.store(true, Ordering::SeqCst);
        while s.hooks().landed.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // A renewal has been applied and its answer is 40 ms away.
        a.release().await.unwrap();
        let doc = state::load(dyn_s.as_ref()).await.unwrap().doc;
        assert_eq!(doc.lease, None, "the released lease is gone at once");
        acquire(&dyn_s, 60, true)
            .await
            .unwrap()
            .release()
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn second_runner_is_refused_while_held() {
    let s = store();
    let a = acquire(&s, 10_000, true).await.unwrap();
    let err = acquire(&s, 10_000, true).await.unwrap_err();
    assert!(matches!(err, MigrateError::LockHeld { .. }));
    assert_eq!(err.exit_code(), 3);
    a.release().await.unwrap();
    let b = acquire(&s, 10_000, true).await.unwrap();
    assert!(b.token() > 1, "tokens increase with every acquisition");
    b.release().await.unwrap();
}

#[tokio::test]
async fn expired_lease_is_taken_over_and_old_holder_is_fenced() {
    let s = store();
    let a = acquire(&s, 50, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    let b = acquire(&s, 10_000, true).await.unwrap();
    assert!(b.token() > a.token());
    let err = a
        .update(|doc| doc.kinds.insert("x".into(), 9))
        .await
        .unwrap_err();
    assert!(matches!(err, MigrateError::LeaseLost { .. }));
    assert!(a.is_lost());
    // The new holder's writes go through, and the stale write left no trace.
    b.update(|doc| doc.kinds.insert("y".into(), 1))
        .await
        .unwrap();
    let doc = state::load(s.as_ref()).await.unwrap().doc;
    assert!(!doc.kinds.contains_key("x"));
    assert_eq!(doc.kinds.get("y"), Some(&1));
    a.release().await.unwrap();
    b.release().await.unwrap();
}

#[tokio::test]
async fn renewal_keeps_the_lease_alive() {
    let s = store();
    let a = acquire(&s, 90, true).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let err = acquire(&s, 90, true).await.unwrap_err();
    assert!(matches!(err, MigrateError::LockHeld { .. }));
    a.update(|_| ()).await.unwrap();
    a.release().await.unwrap();
}

#[tokio::test]
async fn waiting_runner_gets_the_lease_after_release() {
    let s = store();
    let a = acquire(&s, 10_000, true).await.unwrap();
    let s2 = Arc::clone(&s);
    let waiter = tokio::spawn(async move {
        Lease::acquire(
            s2,
            &LeaseOptions {
                wait: Some(Duration::from_secs(5)),
                ..opts(10_000, true)
            },
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    a.release().await.unwrap();
    let b = waiter.await.unwrap().unwrap();
    b.release().await.unwrap();
}

#[tokio::test]
async fn release_stale_refuses_a_live_lease_unless_forced() {
    let s = store();
    let a = acquire(&s, 10_000, true).await.unwrap();
    assert!(matches!(
        release_stale(s.as_ref(), false).await,
        Err(MigrateError::LockHeld { .. })
    ));
    let removed = release_stale(s.as_ref(), true).await.unwrap().unwrap();
    assert_eq!(removed.token, a.token());
    // The forced-out holder is fenced.
    assert!(matches!(
        a.update(|_| ()).await,
        Err(MigrateError::LeaseLost { .. })
    ));
}
