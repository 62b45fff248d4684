//! The lazy battery on the memory and embedded stores.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use async_trait::async_trait;
use tern_core::store::Store;
use tern_core::store::embedded::EmbeddedStore;
use tern_testkit::battery::{Backend, MemoryBackend};
use tern_testkit::intercept::Forward as _;

mod memory {
    tern_testkit::lazy_battery_tests!("memory", async { Ok::<_, String>(super::MemoryBackend) });
}

/// Fresh embedded stores, each in a file of its own.
struct EmbeddedBackend(tempfile::TempDir);

#[async_trait]
impl Backend for EmbeddedBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        let path = self.0.path().join(format!("{}.redb", uuid::Uuid::new_v4()));
        Arc::new(EmbeddedStore::open(path).unwrap())
    }
}

mod embedded {
    tern_testkit::lazy_battery_tests!("embedded", async {
        Ok::<_, String>(super::EmbeddedBackend(tempfile::tempdir().unwrap()))
    });
}

/// Records the `limit` of every server-side call a sweep makes.
#[derive(Debug, Default)]
struct Limits(std::sync::Mutex<Vec<usize>>);

#[async_trait]
impl tern_testkit::intercept::Intercept for Limits {
    async fn update_in_place(
        &self,
        inner: &dyn Store,
        request: tern_core::store::PushdownRequest,
    ) -> tern_core::store::Result<tern_core::store::PushdownPage> {
        self.0.lock().unwrap().push(request.limit);
        inner.update_in_place(request).await
    }
}

/// `SweepOptions::call_size` bounds every server-side call of the sweep
/// (`tern sweep --call-size`), the default being `IN_STORE_LIMIT`; every
/// entity is migrated either way.
#[tokio::test]
async fn the_sweep_takes_at_most_call_size_entities_per_server_side_call() {
    use tern_core::lazy::{SweepOptions, sweep};
    use tern_core::store::memory::MemoryStore;
    use tern_testkit::intercept::Intercepted;

    let n = 250;
    let default = SweepOptions::default().call_size;
    assert_eq!(default, sweep::IN_STORE_LIMIT);
    for call_size in [30, default] {
        let hooked = Arc::new(Intercepted::new(
            Arc::new(MemoryStore::new()),
            Limits::default(),
        ));
        let store: Arc<dyn Store> = hooked.clone();
        install_over(&store, "post", n, "lazy\nadd post.likes = 0\n").await;
        let options = SweepOptions {
            call_size,
            ..SweepOptions::default()
        };
        let report = sweep_with(&store, &options).await;
        assert_eq!(
            report.migrated.get("post"),
            Some(&(n as u64)),
            "call size {call_size}"
        );
        let limits = hooked.hooks().0.lock().unwrap().clone();
        assert!(
            limits.len() >= (n as usize).div_ceil(call_size)
                && limits.iter().all(|&l| l == call_size),
            "call size {call_size}: limits {limits:?}"
        );
    }
}

/// The sweep of a lazy kind rename with no other step (KVolve's Amico update)
/// re-keys the former name and proves it empty, and neither scans nor counts
/// the new name: a kind at version 0 holds nothing stale, and on Redis each
/// would read every entity there. With a step, the new name is swept and
/// counted as before.
#[tokio::test]
async fn a_pure_kind_rename_sweeps_only_the_former_name() {
    use tern_core::store::Filter;
    use tern_core::store::memory::MemoryStore;
    use tern_testkit::intercept::{Intercepted, PassLog};

    for (script, reads_new_name) in [
        ("lazy\nrename kind blogpost to post\n", false),
        (
            "lazy\nrename kind blogpost to post\nadd post.likes = 0\n",
            true,
        ),
    ] {
        let hooked = Arc::new(Intercepted::new(
            Arc::new(MemoryStore::new()),
            PassLog::default(),
        ));
        let store: Arc<dyn Store> = hooked.clone();
        install_over(&store, "blogpost", 40, script).await;
        hooked.hooks().clear();
        let report = sweep_all(&store).await;
        let reads = hooked.hooks().calls();
        assert_eq!(report.remaining(), 0, "{script:?}");
        assert_eq!(store.count("blogpost", Filter::all()).await.unwrap(), 0);
        assert_eq!(store.count("post", Filter::all()).await.unwrap(), 40);
        assert_eq!(
            reads.iter().any(|r| r.ends_with(" post")),
            reads_new_name,
            "{script:?}: {reads:?}"
        );
        assert!(
            reads.iter().any(|r| r == "count blogpost"),
            "{script:?}: the census counts the former name: {reads:?}"
        );
    }
}

/// A sweep checkpoint on the new name of a pure kind rename (which an earlier
/// version's sweep scanned, and this one skips: nothing there can be stale)
/// does not stop the sweep: it moves every entity under the former name and
/// records the migration complete.
#[tokio::test]
async fn a_checkpoint_on_a_name_with_nothing_stale_does_not_stop_the_sweep() {
    use tern_core::migrate::{SweepState, state};
    use tern_core::store::Filter;
    use tern_core::store::memory::MemoryStore;

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    install_over(
        &store,
        "blogpost",
        40,
        "lazy\nrename kind blogpost to post\n",
    )
    .await;
    let mut current = state::load(store.as_ref()).await.unwrap();
    current.doc.sweep = Some(SweepState {
        kind: "post".into(),
        name: "post".into(),
        cursor: None,
        migrated: 0,
        partitions: None,
        stale_at_start: None,
        lease_token: None,
        in_store: false,
    });
    state::store_if(store.as_ref(), current.revision, &current.doc)
        .await
        .unwrap()
        .unwrap();
    let report = sweep_all(&store).await;
    assert!(report.resumed);
    assert_eq!(report.remaining(), 0, "{report:?}");
    assert_eq!(report.completed, vec![1]);
    assert_eq!(store.count("blogpost", Filter::all()).await.unwrap(), 0);
    assert_eq!(store.count("post", Filter::all()).await.unwrap(), 40);
}

/// Writes `n` entities `{n: i}` of `kind` into `store`, then installs `script`
/// as migration 1.
async fn install_over(store: &Arc<dyn Store>, kind: &str, n: i64, script: &str) {
    use tern_core::model::{Entity, Key, Map, Value};
    use tern_core::store::Write;
    let writes = (0..n)
        .map(|i| {
            let value = Map::from([("n".to_owned(), Value::Int(i))]);
            Write::Put(Entity::new(Key::new(kind, i).unwrap(), value))
        })
        .collect();
    store.write_batch(writes).await.unwrap();
    tern_testkit::lazy::up(store, &[(1, script)]).await.unwrap();
}

/// `tern sweep` of every kind with the default options.
async fn sweep_all(store: &Arc<dyn Store>) -> tern_core::lazy::SweepReport {
    sweep_with(store, &tern_core::lazy::SweepOptions::default()).await
}

/// `tern sweep` of every kind with `options` and the default lease.
async fn sweep_with(
    store: &Arc<dyn Store>,
    options: &tern_core::lazy::SweepOptions,
) -> tern_core::lazy::SweepReport {
    tern_core::lazy::sweep::sweep(
        Arc::clone(store),
        &tern_core::migrate::LeaseOptions::default(),
        &Default::default(),
        options,
    )
    .await
    .unwrap()
}

/// Each of the `n` posts [`install_over`] wrote, migrated by `add post.likes
/// = 0`: `likes` added, `n` kept.
async fn assert_posts_migrated(store: &Arc<dyn Store>, n: i64) {
    use tern_core::model::{Key, Value};
    for i in 0..n {
        let e = store
            .get(&Key::new("post", i).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.value.get("likes"), Some(&Value::Int(0)), "post {i}");
        assert_eq!(e.value.get("n"), Some(&Value::Int(i)), "post {i}");
    }
}

/// A sweep over the `n` posts of [`install_over`] that finished: each counted
/// once, none stale, migration 1 complete, every post migrated, no
/// checkpoint (nor split) left.
async fn assert_sweep_complete(
    store: &Arc<dyn Store>,
    report: &tern_core::lazy::SweepReport,
    n: i64,
) {
    assert_eq!(report.migrated.get("post"), Some(&(n as u64)), "{report:?}");
    assert_eq!(report.remaining(), 0, "{report:?}");
    assert_eq!(report.completed, vec![1]);
    assert_posts_migrated(store, n).await;
    let doc = tern_core::migrate::state::load(store.as_ref())
        .await
        .unwrap()
        .doc;
    assert!(doc.sweep.is_none(), "{:?}", doc.sweep);
}

/// `tern sweep --workers 4 --partitions 8` on a store with partitions: every
/// stale entity is migrated once (the report counts each once), on the
/// in-store and the client path, and the migration is recorded complete with
/// no split left in the checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_sweep_migrates_every_entity_once() {
    use tern_core::lazy::SweepOptions;
    use tern_core::store::memory::MemoryStore;

    let n = 600;
    for pushdown in [true, false] {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        install_over(&store, "post", n, "lazy\nadd post.likes = 0\n").await;
        let options = SweepOptions {
            workers: 4,
            partitions: Some(8),
            batch_size: 25,
            pushdown,
            ..SweepOptions::default()
        };
        let report = sweep_with(&store, &options).await;
        assert_sweep_complete(&store, &report, n).await;
    }
}

/// A partitioned sweep killed mid-way (its task aborted, as by `kill -9`:
/// no release, no last checkpoint) leaves its split and per-partition
/// checkpoints in the state document; the next `tern sweep`, even with one
/// worker and no `--partitions`, keeps that split, takes the dead workers'
/// partitions over once their leases expire, and completes the migration
/// with every entity migrated and none counted twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_partitioned_sweep_resumes_from_its_partition_checkpoints() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;
    use tern_core::lazy::{SweepOptions, sweep};
    use tern_core::migrate::LeaseOptions;
    use tern_core::migrate::state;
    use tern_core::store::memory::MemoryStore;

    let n: i64 = 2000;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    install_over(&store, "post", n, "lazy\nadd post.likes = 0\n").await;
    let lease = LeaseOptions {
        ttl: Duration::from_millis(300),
        wait: Some(Duration::from_secs(30)),
        ..LeaseOptions::default()
    };
    let first = {
        let (store, lease) = (Arc::clone(&store), lease.clone());
        tokio::spawn(async move {
            sweep::sweep(
                store,
                &lease,
                &Default::default(),
                &SweepOptions {
                    workers: 4,
                    partitions: Some(8),
                    batch_size: 20,
                    pushdown: false,
                    max_rate: Some(2000.0),
                    ..SweepOptions::default()
                },
            )
            .await
        })
    };
    // Killed once partitions are held and some checkpointed progress.
    let mut seen = None;
    for _ in 0..2000 {
        let doc = state::load(store.as_ref()).await.unwrap().doc;
        if let Some(p) = doc.sweep.as_ref().and_then(|s| s.partitions.as_ref())
            && p.parts
                .iter()
                .any(|p| p.lease.is_some() && p.counts.processed > 0)
        {
            seen = Some(p.clone());
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    first.abort();
    let _ = first.await;
    let split = seen.expect("the sweep recorded its split and checkpointed partitions");
    assert_eq!(split.parts.len(), 8, "the memory store splits into 8");
    let doc = state::load(store.as_ref()).await.unwrap().doc;
    let left = doc
        .sweep
        .as_ref()
        .and_then(|s| s.partitions.as_ref())
        .unwrap();
    assert!(!left.all_done(), "killed before the end");
    // The resumed sweep: one worker, no --partitions. A watcher records the
    // takeovers: the recorded split continued, not a new scan.
    let takeovers = Arc::new(AtomicUsize::new(0));
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (store, takeovers, watching) = (
            Arc::clone(&store),
            Arc::clone(&takeovers),
            Arc::clone(&watching),
        );
        tokio::spawn(async move {
            while watching.load(Ordering::SeqCst) {
                let doc = state::load(store.as_ref()).await.unwrap().doc;
                if let Some(p) = doc.sweep.as_ref().and_then(|s| s.partitions.as_ref()) {
                    assert_eq!(p.parts.len(), 8, "the recorded split is kept");
                    let t: u32 = p.parts.iter().map(|p| p.takeovers).sum();
                    takeovers.fetch_max(t as usize, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let report = sweep::sweep(
        Arc::clone(&store),
        &lease,
        &Default::default(),
        &SweepOptions {
            pushdown: false,
            batch_size: 20,
            max_rate: Some(4000.0),
            ..SweepOptions::default()
        },
    )
    .await
    .unwrap();
    watching.store(false, Ordering::SeqCst);
    watcher.await.unwrap();
    assert!(report.resumed);
    assert_eq!(report.remaining(), 0);
    assert_eq!(report.completed, vec![1]);
    assert!(
        takeovers.load(Ordering::SeqCst) > 0,
        "the dead workers' partitions were taken over"
    );
    let migrated = report.migrated.get("post").copied().unwrap_or(0);
    assert!(
        migrated <= n as u64 && migrated >= n as u64 - 4 * 20,
        "each entity counted at most once, at most one batch per killed worker uncounted: {migrated}"
    );
    assert_posts_migrated(&store, n).await;
}

/// Hooks that "kill" a sweep right after the `n`-th call (from 1) of the
/// in-store path has written: the call is applied, then fails, so the sweep
/// stops before it records its checkpoint, as a kill between a write and its
/// checkpoint leaves it.
#[derive(Debug)]
struct DiesAfterWrite {
    n: usize,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl tern_testkit::intercept::Intercept for DiesAfterWrite {
    async fn update_in_place(
        &self,
        inner: &dyn Store,
        request: tern_core::store::PushdownRequest,
    ) -> tern_core::store::Result<tern_core::store::PushdownPage> {
        let page = inner.update_in_place(request).await?;
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if call == self.n {
            return Err(tern_core::store::Error::new(
                tern_core::store::ErrorKind::Unavailable,
                "killed after the write, before the checkpoint",
            ));
        }
        Ok(page)
    }
}

/// Issue 34 item 11: a sweep killed between a batch's write and its
/// checkpoint, then resumed, reports every entity once over both runs (the
/// batch the kill left unrecorded is not lost from the count, nor counted twice).
#[tokio::test]
async fn a_resumed_sweep_counts_every_entity_once() {
    use tern_core::lazy::{SweepOptions, sweep};
    use tern_core::migrate::LeaseOptions;
    use tern_core::store::memory::MemoryStore;
    use tern_testkit::intercept::Intercepted;

    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    install_over(&memory, "post", 40, "lazy\nadd post.likes = 0\n").await;
    let options = SweepOptions {
        batch_size: 10,
        ..SweepOptions::default()
    };
    let dying: Arc<dyn Store> = Arc::new(Intercepted::new(
        Arc::clone(&memory),
        DiesAfterWrite {
            n: 2,
            calls: Default::default(),
        },
    ));
    let killed = sweep::sweep(
        dying,
        &LeaseOptions::default(),
        &Default::default(),
        &options,
    )
    .await;
    assert!(killed.is_err(), "the first run was to be killed");
    let report = sweep::sweep(
        memory,
        &LeaseOptions::default(),
        &Default::default(),
        &options,
    )
    .await
    .unwrap();
    assert!(report.resumed);
    assert_eq!(report.remaining(), 0, "{report:?}");
    assert_eq!(report.migrated.get("post"), Some(&40), "{report:?}");
}

/// Issue 34 item 11: the sweep of a lazy kind rename with a step counts each
/// entity once, although the in-store path re-keys it from the former name
/// and then advances it under the new one.
#[tokio::test]
async fn a_sweep_across_a_kind_rename_counts_each_entity_once() {
    use tern_core::store::memory::MemoryStore;

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let script = "lazy\nrename kind blogpost to post\nadd post.likes = 0\n";
    install_over(&store, "blogpost", 40, script).await;
    let report = sweep_all(&store).await;
    assert_eq!(report.remaining(), 0, "{report:?}");
    assert_eq!(report.migrated.get("post"), Some(&40), "{report:?}");
}

/// What [`AbortsUnguarded`] does to an atomic write with no guard.
#[derive(Debug, Clone, Copy)]
enum Abort {
    /// The store's transaction aborts (nothing written) and the store runs it
    /// again, as the MongoDB adapter does with a `WriteConflict`.
    RunAgain,
    /// The store answers `Conflict` (a store that breaks the contract of
    /// `write_atomic`: a write with no condition is never a conflict).
    AnswerConflict,
}

/// A store whose transaction the server aborts, writing nothing, on the first
/// `n` runs of the atomic writes that have no guard: as MongoDB aborts one
/// (`WriteConflict`) when a sweep's rename by copy touches its documents
/// meanwhile.
#[derive(Debug)]
struct AbortsUnguarded {
    n: usize,
    calls: std::sync::atomic::AtomicUsize,
    then: Abort,
}

impl AbortsUnguarded {
    fn new(n: usize, then: Abort) -> AbortsUnguarded {
        AbortsUnguarded {
            n,
            calls: Default::default(),
            then,
        }
    }

    /// Whether this run aborts.
    fn aborts(&self, guards: &[tern_core::store::Guard]) -> bool {
        guards.is_empty() && self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < self.n
    }
}

#[async_trait]
impl tern_testkit::intercept::Intercept for AbortsUnguarded {
    async fn write_atomic(
        &self,
        inner: &dyn Store,
        guards: Vec<tern_core::store::Guard>,
        writes: Vec<tern_core::store::Write>,
    ) -> tern_core::store::Result<tern_core::store::WriteOutcome> {
        use tern_core::store::{Error, ErrorKind, WriteOutcome, txn_retry::TransactionRetry};
        let mut retry = TransactionRetry::new();
        while self.aborts(&guards) {
            match self.then {
                Abort::RunAgain => {
                    retry
                        .after_abort(Error::new(ErrorKind::Rejected, "WriteConflict"), || {
                            "a transaction of the test store".to_owned()
                        })
                        .await?;
                }
                Abort::AnswerConflict => return Ok(WriteOutcome::Conflict),
            }
        }
        inner.write_atomic(guards, writes).await
    }
}

/// A lazy client over `inner` through `hooks`, declaring `post` v1, after a
/// lazy `rename kind blogpost to post` of 3 entities was installed.
async fn client_over_a_pending_rename(
    hooks: AbortsUnguarded,
) -> (Arc<dyn Store>, tern_core::lazy::LazyClient) {
    use tern_core::store::memory::MemoryStore;
    use tern_testkit::intercept::Intercepted;

    let inner: Arc<dyn Store> = Arc::new(MemoryStore::new());
    install_over(
        &inner,
        "blogpost",
        3,
        "lazy\nrename kind blogpost to post\nadd post.likes = 0\n",
    )
    .await;
    let store: Arc<dyn Store> = Arc::new(Intercepted::new(Arc::clone(&inner), hooks));
    let client = tern_core::lazy::LazyClient::builder(store)
        .declare("post", 1)
        .connect()
        .await
        .unwrap();
    (inner, client)
}

/// A put and a delete of a kind with a former name (one atomic write with
/// no guard) whose transaction the store aborts are written again, by the
/// store, and acknowledged only once written: a write the client
/// acknowledges is in the store (the lost update once seen on MongoDB while
/// a sweep renamed the kind). When the store gives up, the put is an error
/// and nothing is written; a store that answers such a write `Conflict` gets
/// an error too, never an acknowledgement.
#[tokio::test(start_paused = true)]
async fn a_put_the_store_aborts_is_written_again_not_lost() {
    use tern_core::lazy::LazyError;
    use tern_core::model::{Key, Map, Value};
    use tern_core::store::{ErrorKind, txn_retry::TRANSACTION_ATTEMPTS};

    let mine = Map::from([("mine".to_owned(), Value::Int(7))]);
    let (inner, client) =
        client_over_a_pending_rename(AbortsUnguarded::new(3, Abort::RunAgain)).await;
    client
        .put(&Key::new("post", 1).unwrap(), mine.clone())
        .await
        .unwrap();
    let stored = inner.get(&Key::new("post", 1).unwrap()).await.unwrap();
    assert_eq!(
        stored.map(|e| e.value),
        Some(mine.clone()),
        "the acknowledged put was lost"
    );
    assert!(absent(&inner, "blogpost", 1).await);
    client.delete(&Key::new("post", 2).unwrap()).await.unwrap();
    assert!(absent(&inner, "post", 2).await && absent(&inner, "blogpost", 2).await);

    // Aborted on every run: a temporary error, and nothing written.
    let always = usize::try_from(TRANSACTION_ATTEMPTS).unwrap();
    let (inner, client) =
        client_over_a_pending_rename(AbortsUnguarded::new(always, Abort::RunAgain)).await;
    let err = client
        .put(&Key::new("post", 1).unwrap(), mine.clone())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LazyError::Store(e) if e.kind() == ErrorKind::Busy && e.is_temporary()),
        "{err}"
    );
    assert!(absent(&inner, "post", 1).await && !absent(&inner, "blogpost", 1).await);

    // A `Conflict` to a write with no condition: not acknowledged.
    let (inner, client) =
        client_over_a_pending_rename(AbortsUnguarded::new(1, Abort::AnswerConflict)).await;
    let err = client
        .put(&Key::new("post", 1).unwrap(), mine)
        .await
        .unwrap_err();
    assert!(matches!(err, LazyError::Contention { .. }), "{err}");
    assert!(absent(&inner, "post", 1).await);
}

/// Whether `store` holds nothing under `kind` with `id`.
async fn absent(store: &Arc<dyn Store>, kind: &str, id: i64) -> bool {
    let key = tern_core::model::Key::new(kind, id).unwrap();
    store.get(&key).await.unwrap().is_none()
}

/// Waits (at most 20 s) until the sweep has recorded a split, and gives its checkpoint.
async fn recorded_sweep_split(store: &Arc<dyn Store>) -> tern_core::migrate::state::SweepState {
    for _ in 0..2000 {
        let doc = tern_core::migrate::state::load(store.as_ref())
            .await
            .unwrap()
            .doc;
        if let Some(s) = doc.sweep.filter(|s| s.partitions.is_some()) {
            return s;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the sweep recorded no split within 20 s");
}

/// `tern worker` joining a partitioned `tern sweep` another process runs
/// (one throttled worker there, two here): the joiner sweeps partitions of
/// the split, on the path the split records (in the store or the client
/// path), the sweep waits for them, counts every entity once and records the
/// migration complete, and the joiner returns once the sweep is over. With
/// no sweep running, a joiner returns at once; a split that a killed sweep
/// left is not joined (its next `tern sweep` resumes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_joins_a_running_partitioned_sweep_and_never_a_dead_ones() {
    use std::time::Duration;
    use tern_core::lazy::SweepOptions;
    use tern_core::lazy::sweep::{self, JoinReport};
    use tern_core::migrate::LeaseOptions;
    use tern_core::store::memory::MemoryStore;

    let n: i64 = 1200;
    let ttl = Duration::from_millis(300);
    let lease = LeaseOptions {
        ttl,
        wait: Some(Duration::from_secs(30)),
        ..LeaseOptions::default()
    };
    let joiner = SweepOptions {
        workers: 2,
        batch_size: 20,
        ..SweepOptions::default()
    };
    let throttled = |pushdown, rate| SweepOptions {
        workers: 1,
        partitions: Some(8),
        batch_size: 20,
        pushdown,
        max_rate: Some(rate),
        ..SweepOptions::default()
    };
    for pushdown in [true, false] {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        install_over(&store, "post", n, "lazy\nadd post.likes = 0\n").await;
        let code = Default::default();
        let idle = sweep::join(&store, &code, &joiner, ttl).await.unwrap();
        assert_eq!(idle, JoinReport::default(), "no sweep runs");

        let sweeper = {
            let (store, lease) = (Arc::clone(&store), lease.clone());
            let options = throttled(pushdown, 1500.0);
            tokio::spawn(
                async move { sweep::sweep(store, &lease, &Default::default(), &options).await },
            )
        };
        let split = recorded_sweep_split(&store).await;
        assert_eq!(split.in_store, pushdown, "the split records its path");
        let joined = sweep::join(&store, &code, &joiner, ttl).await.unwrap();
        let report = sweeper.await.unwrap().unwrap();
        assert!(joined.partitions >= 1, "pushdown {pushdown}: {joined:?}");
        assert_sweep_complete(&store, &report, n).await;
    }

    // A sweep killed mid-split (no release): once its lease expires, a
    // joiner leaves its split alone.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    install_over(&store, "post", n, "lazy\nadd post.likes = 0\n").await;
    let killed = {
        let (store, lease) = (Arc::clone(&store), lease.clone());
        tokio::spawn(async move {
            sweep::sweep(store, &lease, &Default::default(), &throttled(false, 200.0)).await
        })
    };
    recorded_sweep_split(&store).await;
    killed.abort();
    let _ = killed.await;
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    let left = sweep::join(&store, &Default::default(), &joiner, ttl)
        .await
        .unwrap();
    assert_eq!(
        left,
        JoinReport::default(),
        "a dead sweep's split is not joined"
    );
    let doc = tern_core::migrate::state::load(store.as_ref())
        .await
        .unwrap()
        .doc;
    let split = doc
        .sweep
        .and_then(|s| s.partitions)
        .expect("the split stays");
    assert!(!split.all_done());
    let report = sweep_with(&store, &SweepOptions::default()).await;
    assert_eq!(report.remaining(), 0);
    assert_posts_migrated(&store, n).await;
}
