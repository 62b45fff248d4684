//! The engine battery: every guarantee of `tern up`, written once and run
//! against every store (the memory and embedded stores in tern-core's tests,
//! MongoDB, Redis and Cassandra in `tern-integration-tests`).
//!
//! Each function takes a [`Backend`] that hands out fresh, isolated stores and
//! panics (like a test) when a guarantee does not hold. [`battery_tests!`]
//! turns the whole battery into `#[tokio::test]` functions for one backend.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

#[cfg(feature = "fault-injection")]
use tern_core::migrate::{FaultAt, FaultHook, FaultPoint, UpReport};
use tern_core::migrate::{
    LeaseOptions, MigrateError, Migration, MigrationSet, Migrator, RunOptions,
};
use tern_core::model::json::{entity_from_json_line, entity_to_json_line};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::memory::MemoryStore;
use tern_core::store::{Filter, Store, StoreExt, Write, WriteOutcome};

#[cfg(feature = "fault-injection")]
use crate::intercept::{Intercepted, TornWrite};

mod backup;
mod rename;
#[cfg(feature = "fault-injection")]
mod rename_copy;

#[cfg(feature = "fault-injection")]
pub use rename_copy::{
    CopyRenameBackend, rename_by_copy_completes_a_move_interrupted_after_the_copy,
    rename_by_copy_never_loses_an_update_made_between_copy_and_delete,
    rename_by_copy_reports_a_collision_and_overwrites_nothing,
};

pub use backup::{
    an_export_is_a_backup_export_import_export_is_identical_in_a_new_store, export_text,
    import_text, importing_tern_state_into_a_non_empty_store_is_refused_unless_it_matches,
};
pub use rename::{reference, rename_supported, state_doc};
#[cfg(feature = "fault-injection")]
pub use rename::{
    rename_kind_never_overwrites_and_stops_on_a_namesake,
    rename_kind_rekeys_every_entity_and_keeps_the_prefix_history,
    rename_kind_resumes_after_a_crash_at_every_fault_point,
    rename_kind_with_a_concurrent_writer_on_the_old_kind,
};

/// Hands out stores for the battery.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A fresh, empty store of its own (its own database, key prefix or keyspace).
    async fn fresh(&self) -> Arc<dyn Store>;
}

/// A backend of in-memory stores.
#[derive(Debug, Default)]
pub struct MemoryBackend;

#[async_trait]
impl Backend for MemoryBackend {
    async fn fresh(&self) -> Arc<dyn Store> {
        Arc::new(MemoryStore::new())
    }
}
/// Release 2 of the blog of \[SE\]: posts get likes, `text` becomes `content`.
pub const RELEASE2: &str = "add blogpost.likes = 0\nrename blogpost.text to content\n";
/// Release 3: the author's email is copied into posts, the url moved there.
pub const RELEASE3: &str = "copy user.email to blogpost where user.name = blogpost.author\n\
                        move user.url to blogpost where user.name = blogpost.author\n";

/// A migration set of scripts `(number, text)`.
pub fn set(scripts: &[(u32, &str)]) -> MigrationSet {
    let mut s = MigrationSet::new();
    for (id, text) in scripts {
        s.add(
            Migration::from_script(*id, &format!("m{id}"), &format!("{id:04}_m{id}.tern"), text)
                .unwrap(),
        )
        .unwrap();
    }
    s
}

/// A map of properties.
pub fn map(pairs: &[(&str, Value)]) -> Map {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// An entity of `kind` with id `id` at `version`, holding `props`.
pub fn entity(kind: &str, id: impl Into<Value>, version: u64, props: &[(&str, Value)]) -> Entity {
    let mut e = Entity::new(Key::new(kind, id).unwrap(), map(props));
    e.version = version;
    e
}

/// The entity `kind:id` as `store` holds it (panics when it is absent or the read fails).
pub async fn stored(store: &dyn Store, kind: &str, id: impl Into<Value>) -> Entity {
    let key = Key::new(kind, id).unwrap();
    match store.get(&key).await {
        Ok(Some(e)) => e,
        Ok(None) => panic!("{key} is not in the store"),
        Err(e) => panic!("reading {key}: {e}"),
    }
}

/// The blog of \[SE\]: users and their posts, plus posts by unknown authors and users without posts.
pub fn blog(users: usize, posts_per_user: usize) -> Vec<Entity> {
    let mut out = Vec::new();
    for u in 0..users {
        let name = format!("user{u}");
        let mut props = vec![
            ("name", Value::from(name.as_str())),
            ("email", Value::from(format!("{name}@example.org"))),
        ];
        if u % 3 != 0 {
            props.push(("url", Value::from(format!("http://{name}.example.org"))));
        }
        out.push(Entity::new(
            Key::new("user", format!("u{u:04}")).unwrap(),
            map(&props),
        ));
        for p in 0..posts_per_user {
            out.push(Entity::new(
                Key::new("blogpost", format!("p{u:04}-{p}")).unwrap(),
                map(&[
                    ("title", Value::from(format!("post {p} of {name}"))),
                    ("text", Value::from("NoSQL databases ...")),
                    ("author", Value::from(name.as_str())),
                ]),
            ));
        }
    }
    // A post whose author has no user entity, and one with no author.
    out.push(Entity::new(
        Key::new("blogpost", "orphan").unwrap(),
        map(&[
            ("title", "orphan".into()),
            ("text", "x".into()),
            ("author", "nobody".into()),
        ]),
    ));
    out.push(Entity::new(
        Key::new("blogpost", "anonymous").unwrap(),
        map(&[("title", "anon".into())]),
    ));
    out
}

/// Writes the entities unconditionally.
pub async fn load(store: &dyn Store, entities: &[Entity]) {
    store
        .write_batch(entities.iter().cloned().map(Write::Put).collect())
        .await
        .unwrap();
}

/// Every entity of `kind`, in the store's scan order (pages of `limit`).
pub async fn kind_entities(store: &dyn Store, kind: &str, limit: usize) -> Vec<Entity> {
    let mut out = Vec::new();
    let mut cursor = None;
    loop {
        let page = crate::pages::page_of(store, kind, &Filter::all(), cursor, limit)
            .await
            .unwrap();
        out.extend(page.entities);
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return out,
        }
    }
}

/// Every entity as JSON Lines, sorted: two stores with equal exports hold equal data.
///
/// A scan may return an entity twice (Redis's SCAN does while the server
/// rehashes a table: at least once, not exactly once), so identical lines are
/// kept once, as `tern export` keeps one line per key (`backup::spill`); an
/// entity seen twice with two different values still shows as two lines.
pub async fn export(store: &dyn Store) -> String {
    let mut lines = Vec::new();
    for kind in store.kinds().await.unwrap() {
        let entities = kind_entities(store, &kind, 100).await;
        lines.extend(entities.iter().map(entity_to_json_line));
    }
    lines.sort();
    lines.dedup();
    lines.join("\n")
}

fn fast_lease() -> LeaseOptions {
    LeaseOptions {
        ttl: Duration::from_millis(60),
        wait: None,
        renew: true,
    }
}

fn opts(batch: usize) -> RunOptions {
    RunOptions {
        batch_size: batch,
        pushdown_batch_size: batch,
        ..RunOptions::default()
    }
}

/// [`opts`] at no more than `rate` entities a second.
fn throttled(batch: usize, rate: f64) -> RunOptions {
    RunOptions {
        max_rate: Some(rate),
        ..opts(batch)
    }
}

/// A migrator of `migrations` with the run options `run` and a short lease.
fn migrator_with(store: Arc<dyn Store>, migrations: MigrationSet, run: RunOptions) -> Migrator {
    Migrator::new(store, migrations)
        .with_run_options(run)
        .with_lease_options(fast_lease())
}

/// A migrator with a short lease and the given batch size.
pub fn migrator(store: Arc<dyn Store>, scripts: &[(u32, &str)], batch: usize) -> Migrator {
    migrator_with(store, set(scripts), opts(batch))
}

/// A fault hook that crashes the run the first time it reaches `point`, and the flag
/// telling whether it did.
#[cfg(feature = "fault-injection")]
fn crash_once_at(point: FaultPoint) -> (FaultHook, Arc<AtomicBool>) {
    let fired = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&fired);
    let hook: FaultHook = Arc::new(move |p| p == point && !f.swap(true, Ordering::SeqCst));
    (hook, fired)
}

/// Runs the migrator `runner` gives with a crash the first time it reaches `point`. When it
/// crashed: checks that the run failed with the injected crash, lets the crashed runner's
/// lease expire, and checks that a new runner resumes the interrupted migration. Returns
/// whether it crashed, and the report of the run that finished.
#[cfg(feature = "fault-injection")]
async fn crash_once_then_resume(
    point: FaultPoint,
    runner: impl Fn() -> Migrator,
) -> (bool, UpReport) {
    let (hook, fired) = crash_once_at(point);
    let first = runner().with_fault_hook(hook).up(None).await;
    if !fired.load(Ordering::SeqCst) {
        return (false, first.unwrap());
    }
    assert!(
        matches!(first, Err(MigrateError::InjectedCrash(_))),
        "{first:?}"
    );
    (true, resume_after_death(runner(), point).await)
}

/// Lets a dead runner's lease expire, then runs `runner` (waiting for the expiry,
/// should this machine be slower than the sleep) and checks that it resumes the
/// migration interrupted at `at`.
#[cfg(feature = "fault-injection")]
async fn resume_after_death(runner: Migrator, at: impl std::fmt::Debug) -> UpReport {
    tokio::time::sleep(Duration::from_millis(80)).await;
    let report = runner
        .with_lease_options(LeaseOptions {
            wait: Some(Duration::from_secs(10)),
            ..fast_lease()
        })
        .up(None)
        .await
        .unwrap();
    assert!(
        report.applied.first().is_some_and(|m| m.resumed),
        "the migration interrupted at {at:?} resumes"
    );
    report
}

/// Runs the migrator `runner` gives on `store` wrapped to tear its `n`-th batch
/// write ([`TornWrite`]: the process dies in the middle of the write). When it
/// was reached: checks that the run failed, lets the dead runner's lease expire,
/// and checks that a runner on the store itself resumes the interrupted
/// migration. Returns whether the tear was reached.
#[cfg(feature = "fault-injection")]
async fn torn_write_then_resume(
    store: &Arc<dyn Store>,
    n: usize,
    runner: impl Fn(Arc<dyn Store>) -> Migrator,
) -> bool {
    let (hooks, fired) = TornWrite::at(n);
    let torn: Arc<dyn Store> = Arc::new(Intercepted::new(Arc::clone(store), hooks));
    let first = runner(torn).up(None).await;
    if !fired.load(Ordering::SeqCst) {
        first.unwrap();
        return false;
    }
    assert!(
        first.is_err(),
        "a run whose store died mid-write: {first:?}"
    );
    resume_after_death(runner(Arc::clone(store)), format!("batch write {n}")).await;
    true
}

/// Old application code adds a hit: reads the entity under the first of `keys` that holds
/// it, increments its `hits` and writes it back with compare-and-set, again until that applies.
async fn add_a_hit(store: &dyn Store, keys: &[Key]) {
    loop {
        let mut cur = None;
        for key in keys {
            cur = store.get(key).await.unwrap();
            if cur.is_some() {
                break;
            }
        }
        let cur = cur.unwrap_or_else(|| panic!("entity {keys:?} lost"));
        let mut new = cur.clone();
        let Some(Value::Int(hits)) = new.value.get("hits").cloned() else {
            panic!("hits lost on {}: {cur:?}", cur.key);
        };
        new.value.insert("hits".into(), Value::Int(hits + 1));
        let out = store
            .write_batch(vec![Write::Replace { expected: cur, new }])
            .await
            .unwrap();
        if out[0] == WriteOutcome::Applied {
            return;
        }
    }
}

/// What old application code inserts at a step of [`OldApplication`]: given
/// the store and the step's number, it inserts (or not) and says whether it did.
type InsertHook = Box<dyn Fn(Arc<dyn Store>, i64) -> BoxFuture<'static, bool> + Send + Sync>;

/// Old application code, unaware of versions, writing while a migration
/// runs: at each step `n` (1 ms apart) it adds a hit to id `(n * 7919) %
/// ids`, found under the first of `kinds` that holds it ([`add_a_hit`]), and
/// at every 10th step calls its insert hook.
struct OldApplication {
    stop: Arc<AtomicBool>,
    updates: Arc<Mutex<BTreeMap<i64, i64>>>,
    inserted: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl OldApplication {
    /// Starts it on `store`, and lets it run for 20 ms.
    async fn start(
        store: &Arc<dyn Store>,
        ids: i64,
        kinds: &'static [&'static str],
        insert: InsertHook,
    ) -> OldApplication {
        let stop = Arc::new(AtomicBool::new(false));
        let updates = Arc::new(Mutex::new(BTreeMap::new()));
        let inserted = Arc::new(AtomicU64::new(0));
        let (task_store, task_stop) = (Arc::clone(store), Arc::clone(&stop));
        let (task_updates, task_inserted) = (Arc::clone(&updates), Arc::clone(&inserted));
        let task = tokio::spawn(async move {
            let mut n: i64 = 0;
            while !task_stop.load(Ordering::SeqCst) {
                n += 1;
                let id = (n * 7919) % ids;
                let keys: Vec<Key> = kinds.iter().map(|k| Key::new(*k, id).unwrap()).collect();
                add_a_hit(task_store.as_ref(), &keys).await;
                *task_updates.lock().unwrap().entry(id).or_default() += 1;
                if n % 10 == 0 && insert(Arc::clone(&task_store), n).await {
                    task_inserted.fetch_add(1, Ordering::SeqCst);
                }
                // An application's pace, not a busy loop.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        OldApplication {
            stop,
            updates,
            inserted,
            task,
        }
    }

    /// The hits it added so far.
    fn writes(&self) -> i64 {
        self.updates.lock().unwrap().values().sum()
    }

    /// Stops it: the hits it added to each id, and how many entities it inserted.
    async fn stop(self) -> (BTreeMap<i64, i64>, u64) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
        let updates = self.updates.lock().unwrap().clone();
        (updates, self.inserted.load(Ordering::SeqCst))
    }
}

/// Every entity of `kind`, in pages of 100 (a key returned twice is here twice).
async fn scan_kind(store: &Arc<dyn Store>, kind: &str) -> Vec<Entity> {
    let open = || async { Arc::clone(store) };
    super::pages::scan_pages(open, kind, &Filter::all(), 100, 100_000)
        .await
        .entities
}

pub async fn blog_example_gives_the_exact_expected_entities(backend: &dyn Backend) {
    let store: Arc<dyn Store> = backend.fresh().await;
    let data = [
        entity(
            "user",
            1234,
            0,
            &[
                ("name", "Gerhard".into()),
                ("email", "gerhard@acm.org".into()),
                ("status", "professional".into()),
                ("url", "http://bigdata.org".into()),
            ],
        ),
        entity(
            "blogpost",
            331175,
            0,
            &[
                ("title", "NoSQL Data".into()),
                ("text", "NoSQL databases".into()),
                ("author", "Gerhard".into()),
            ],
        ),
    ];
    load(store.as_ref(), &data).await;
    let report = migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 10)
        .up(None)
        .await
        .unwrap();
    assert_eq!(report.applied.len(), 2);
    let user = stored(store.as_ref(), "user", 1234).await;
    let post = stored(store.as_ref(), "blogpost", 331175).await;
    assert_eq!(
        user.value,
        map(&[
            ("name", "Gerhard".into()),
            ("email", "gerhard@acm.org".into()),
            ("status", "professional".into())
        ])
    );
    // user: one step (the move's source side).
    assert_eq!(user.version, 1);
    assert_eq!(
        post.value,
        map(&[
            ("title", "NoSQL Data".into()),
            ("content", "NoSQL databases".into()),
            ("author", "Gerhard".into()),
            ("likes", Value::Int(0)),
            ("email", "gerhard@acm.org".into()),
            ("url", "http://bigdata.org".into()),
        ])
    );
    // blogpost: add, rename, copy target, move target.
    assert_eq!(post.version, 4);
    // Nothing pending afterwards; running again does nothing.
    let again = migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 10)
        .up(None)
        .await
        .unwrap();
    assert!(again.applied.is_empty());
}

/// The export after an uninterrupted run of releases 2 and 3 on the in-memory reference store.
pub async fn reference_export(entities: &[Entity], batch: usize) -> String {
    memory_export(entities, &[(1, RELEASE2), (2, RELEASE3)], batch).await
}

/// The export after an uninterrupted run of `scripts` over `entities` on a memory store.
pub async fn memory_export(entities: &[Entity], scripts: &[(u32, &str)], batch: usize) -> String {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    load(store.as_ref(), entities).await;
    migrator(Arc::clone(&store), scripts, batch)
        .up(None)
        .await
        .unwrap();
    export(store.as_ref()).await
}

/// Loads `entities` into `store`, runs `scripts` on it in batches of `batch`, and checks that
/// it then holds what a memory store holds after the same run.
pub async fn migrates_like_the_memory_store(
    store: Arc<dyn Store>,
    entities: &[Entity],
    scripts: &[(u32, &str)],
    batch: usize,
) {
    load(store.as_ref(), entities).await;
    migrator(Arc::clone(&store), scripts, batch)
        .up(None)
        .await
        .unwrap();
    assert_eq!(
        export(store.as_ref()).await,
        memory_export(entities, scripts, batch).await,
        "the same entities as the memory store"
    );
}

/// Crash once at `point`, then resume until done; return the export.
#[cfg(feature = "fault-injection")]
async fn crash_and_resume(
    store: Arc<dyn Store>,
    point: FaultPoint,
    batch: usize,
    pushdown: bool,
) -> (bool, String) {
    let run = RunOptions {
        pushdown,
        ..opts(batch)
    };
    let (crashed, _) = crash_once_then_resume(point, || {
        migrator_with(
            Arc::clone(&store),
            set(&[(1, RELEASE2), (2, RELEASE3)]),
            run.clone(),
        )
    })
    .await;
    (crashed, export(store.as_ref()).await)
}

/// A crash at every fault point of every batch of every stage, on the
/// client-side path and (where the store has it) the server-side update path.
#[cfg(feature = "fault-injection")]
pub async fn crash_at_every_batch_boundary_and_mid_batch_resumes_exactly(backend: &dyn Backend) {
    let entities = blog(7, 2);
    let batch_size = 4;
    let expected = reference_export(&entities, batch_size).await;
    let modes: Vec<bool> = if backend.fresh().await.features().pushdown.is_some() {
        vec![false, true]
    } else {
        vec![false]
    };
    for pushdown in modes {
        let mut crashes = 0;
        // Migration 1: stage 0 (posts, 4 batches). Migration 2: stage 0 (copy, 4 batches of
        // posts), stage 1 (move: 4 batches of posts, then 2 of users).
        for (migration, stage, phase, batches) in
            [(1, 0, 0, 5), (2, 0, 0, 5), (2, 1, 0, 5), (2, 1, 1, 3)]
        {
            for batch in 0..batches {
                for at in FaultAt::ALL {
                    let point = FaultPoint {
                        migration,
                        stage,
                        phase,
                        batch,
                        at,
                    };
                    let store: Arc<dyn Store> = backend.fresh().await;
                    load(store.as_ref(), &entities).await;
                    let (crashed, got) = crash_and_resume(store, point, batch_size, pushdown).await;
                    crashes += usize::from(crashed);
                    assert_eq!(
                        got, expected,
                        "after a crash at {point:?} (pushdown {pushdown})"
                    );
                }
            }
        }
        // 4 + 4 + 4 + 2 batches with 3 points each.
        assert!(
            crashes >= 42,
            "the fault points were reached ({crashes} crashes, pushdown {pushdown})"
        );
        // A death in the middle of every batch write, in turn, until a run goes through.
        let run = RunOptions {
            pushdown,
            ..opts(batch_size)
        };
        let mut torn = 0;
        loop {
            let store: Arc<dyn Store> = backend.fresh().await;
            load(store.as_ref(), &entities).await;
            let reached = torn_write_then_resume(&store, torn, |s| {
                migrator_with(s, set(&[(1, RELEASE2), (2, RELEASE3)]), run.clone())
            })
            .await;
            if !reached {
                break;
            }
            assert_eq!(
                export(store.as_ref()).await,
                expected,
                "after a death in batch write {torn} (pushdown {pushdown})"
            );
            torn += 1;
        }
        // The client-side path writes every batch of both migrations (14); the
        // server-side path, migration 2's (10).
        let least = if pushdown { 10 } else { 14 };
        assert!(
            torn >= least,
            "every batch write was torn once ({torn} writes, pushdown {pushdown})"
        );
    }
}

/// The counts of every migration in the ledger, in order.
#[cfg(feature = "fault-injection")]
async fn ledger_counts(store: &dyn Store) -> Vec<(u32, tern_core::migrate::RunCounts)> {
    tern_core::migrate::state::load(store)
        .await
        .unwrap()
        .doc
        .applied
        .iter()
        .map(|e| (e.id, e.counts))
        .collect()
}

/// Where the store commits each batch's checkpoint with the batch's writes
/// ([`Store::atomic_batch_with_meta`]), a crash at any point of a batch of the
/// client-side path leaves nothing written without its checkpoint: after the
/// resume, every count in the ledger (processed, changed, unmatched sources,
/// ...) is what an uninterrupted run records. (Where the two are separate
/// calls, the batch written but not checkpointed goes uncounted.)
#[cfg(feature = "fault-injection")]
pub async fn counts_are_exact_after_a_crash_where_checkpoints_commit_with_their_batch(
    backend: &dyn Backend,
) -> Result<(), String> {
    let probe = backend.fresh().await;
    if probe.features().atomic_batch_with_meta.is_none() {
        return Err(format!(
            "the {} store writes a batch and its checkpoint in two calls",
            probe.info().scheme
        ));
    }
    let entities = blog(7, 2);
    let scripts = [(1, RELEASE2), (2, RELEASE3)];
    let run = RunOptions {
        pushdown: false,
        ..opts(4)
    };
    let reference = {
        let store = backend.fresh().await;
        load(store.as_ref(), &entities).await;
        migrator_with(Arc::clone(&store), set(&scripts), run.clone())
            .up(None)
            .await
            .unwrap();
        ledger_counts(store.as_ref()).await
    };
    assert!(
        reference
            .iter()
            .all(|(_, c)| c.processed > 0 && c.changed > 0),
        "{reference:?}"
    );
    // The second batch of migration 1's stage and of each phase of migration 2
    // (copy targets; move targets, then move sources).
    for (migration, stage, phase) in [(1, 0, 0), (2, 0, 0), (2, 1, 0), (2, 1, 1)] {
        for at in FaultAt::ALL {
            let point = FaultPoint {
                migration,
                stage,
                phase,
                batch: 1,
                at,
            };
            let store: Arc<dyn Store> = backend.fresh().await;
            load(store.as_ref(), &entities).await;
            let (crashed, _) = crash_once_then_resume(point, || {
                migrator_with(Arc::clone(&store), set(&scripts), run.clone())
            })
            .await;
            assert!(crashed, "the run reached {point:?}");
            assert_eq!(
                ledger_counts(store.as_ref()).await,
                reference,
                "the ledger's counts after a crash at {point:?}"
            );
        }
    }
    // A death in the middle of a batch write commits nothing of it here.
    for n in [0, 1, 5, 9] {
        let store: Arc<dyn Store> = backend.fresh().await;
        load(store.as_ref(), &entities).await;
        let reached =
            torn_write_then_resume(&store, n, |s| migrator_with(s, set(&scripts), run.clone()))
                .await;
        assert!(reached, "the run reached batch write {n}");
        assert_eq!(
            ledger_counts(store.as_ref()).await,
            reference,
            "the ledger's counts after a death in batch write {n}"
        );
    }
    Ok(())
}

/// An application keeps updating (read, change `hits`, compare-and-set) and
/// inserting old-shape entities while `tern up` runs, on the client-side path
/// and on the server-side update path: no update is lost, every entity that
/// existed is migrated, every inserted one is kept.
pub async fn a_concurrent_writer_loses_no_update_and_every_entity_reaches_the_target(
    backend: &dyn Backend,
) {
    let modes: Vec<bool> = if backend.fresh().await.features().pushdown.is_some() {
        vec![false, true]
    } else {
        vec![false]
    };
    for pushdown in modes {
        concurrent_writer_run(backend, pushdown).await;
    }
}

async fn concurrent_writer_run(backend: &dyn Backend, pushdown: bool) {
    const N: i64 = 300;
    let store: Arc<dyn Store> = backend.fresh().await;
    let entities: Vec<Entity> = (0..N)
        .map(|i| {
            Entity::new(
                Key::new("blogpost", i).unwrap(),
                map(&[("text", format!("t{i}").into()), ("hits", Value::Int(0))]),
            )
        })
        .collect();
    load(store.as_ref(), &entities).await;
    // Old code also inserts entities of the old shape (version 0).
    let insert: InsertHook = Box::new(|store, n| {
        Box::pin(async move {
            if n > 600 {
                return false;
            }
            let key = Key::new("blogpost", 10_000 + n).unwrap();
            let e = Entity::new(
                key,
                map(&[("text", "late".into()), ("hits", Value::Int(0))]),
            );
            store.put(e).await.unwrap();
            true
        })
    });
    // Let the writer start, then migrate slowly enough that they overlap.
    let writer = OldApplication::start(&store, N, &["blogpost"], insert).await;
    let writes_before = writer.writes();
    let run = RunOptions {
        pushdown,
        // The writer keeps inserting old-shape entities for a while (600
        // iterations) after the scan ends; on a networked store each census
        // pass takes milliseconds, so 3 passes can all see a fresh insert.
        // The census must converge once the inserts stop.
        census_passes: 1000,
        ..throttled(10, 1500.0)
    };
    let report = migrator_with(Arc::clone(&store), set(&[(1, RELEASE2)]), run)
        .up(None)
        .await;
    let writes_during = writer.writes() - writes_before;
    let (updates, inserted) = writer.stop().await;
    let report = report.unwrap();
    assert_eq!(report.applied.len(), 1);
    assert!(
        writes_during >= 20,
        "the writer ran during the migration ({writes_during} writes, pushdown {pushdown})"
    );
    let mut late_seen = 0u64;
    let mut seen = 0i64;
    for e in &scan_kind(&store, "blogpost").await {
        let Value::Int(id) = e.key.id else {
            panic!("{:?}", e.key)
        };
        let hits = updates.get(&id).copied().unwrap_or(0);
        if id >= 10_000 {
            late_seen += 1;
            assert_eq!(e.get("hits"), Some(&Value::Int(0)), "{e:?}");
            continue;
        }
        seen += 1;
        assert_eq!(e.version, 2, "{} migrated (pushdown {pushdown})", e.key);
        assert!(
            e.value.contains_key("content") && !e.value.contains_key("text"),
            "{e:?}"
        );
        assert_eq!(
            e.get("hits"),
            Some(&Value::Int(hits)),
            "no lost update on {} (pushdown {pushdown})",
            e.key
        );
    }
    assert_eq!(seen, N);
    assert_eq!(late_seen, inserted, "inserted entities are kept");
}

#[cfg(feature = "fault-injection")]
pub async fn late_entities_written_during_the_run_are_swept_by_the_census(backend: &dyn Backend) {
    let store: Arc<dyn Store> = backend.fresh().await;
    load(store.as_ref(), &blog(5, 2)).await;
    // Insert an old-shape entity right after the first checkpoint: the scan has passed its key.
    let s2 = Arc::clone(&store);
    let hook: FaultHook = Arc::new(move |p| {
        if p == (FaultPoint {
            migration: 1,
            stage: 0,
            phase: 0,
            batch: 0,
            at: FaultAt::AfterCheckpoint,
        }) {
            let s3 = Arc::clone(&s2);
            let e = Entity::new(
                Key::new("blogpost", "a-late").unwrap(),
                map(&[("text", "late".into())]),
            );
            crate::blocking::block_on_aside(s3.put(e)).unwrap();
        }
        false
    });
    let report = migrator(Arc::clone(&store), &[(1, RELEASE2)], 3)
        .with_fault_hook(hook)
        .up(None)
        .await
        .unwrap();
    if store.features().scan_ordered {
        assert_eq!(report.applied[0].counts.swept, 1);
    } else {
        // An unordered scan (Redis SCAN) may or may not return a key added
        // behind it; the census sweeps it when the scan did not.
        assert!(report.applied[0].counts.swept <= 1);
    }
    let late = stored(store.as_ref(), "blogpost", "a-late").await;
    assert_eq!(late.version, 2);
    assert_eq!(
        late.value,
        map(&[("content", "late".into()), ("likes", Value::Int(0))])
    );
}

pub async fn two_runners_exactly_one_applies(backend: &dyn Backend) {
    let store: Arc<dyn Store> = backend.fresh().await;
    load(store.as_ref(), &blog(30, 3)).await;
    let runner = || {
        migrator_with(
            Arc::clone(&store),
            set(&[(1, RELEASE2)]),
            throttled(5, 500.0),
        )
        .with_lease_options(LeaseOptions {
            ttl: Duration::from_secs(5),
            ..LeaseOptions::default()
        })
    };
    let (a, b) = (runner(), runner());
    let (ra, rb) = tokio::join!(a.up(None), b.up(None));
    let results = [ra, rb];
    let applied = results
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.applied.len() == 1))
        .count();
    let held = results
        .iter()
        .filter(|r| matches!(r, Err(MigrateError::LockHeld { .. })))
        .count();
    assert_eq!((applied, held), (1, 1), "{results:?}");
    assert_eq!(
        results
            .iter()
            .find_map(|r| r.as_ref().err())
            .map(MigrateError::exit_code),
        Some(3)
    );
}

pub async fn a_runner_whose_lease_was_taken_over_stops_without_writing(backend: &dyn Backend) {
    let store: Arc<dyn Store> = backend.fresh().await;
    load(store.as_ref(), &blog(20, 3)).await;
    let expected = reference_export(&blog(20, 3), 4).await;
    // A stalls (no renewal, slow) and loses its lease; B takes over and finishes.
    let a = migrator_with(
        Arc::clone(&store),
        set(&[(1, RELEASE2), (2, RELEASE3)]),
        throttled(4, 100.0),
    )
    .with_lease_options(LeaseOptions {
        ttl: Duration::from_millis(100),
        wait: None,
        renew: false,
    });
    let b = migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 4).with_lease_options(
        LeaseOptions {
            ttl: Duration::from_secs(5),
            wait: Some(Duration::from_secs(10)),
            renew: true,
        },
    );
    let a_run = tokio::spawn(async move { a.up(None).await });
    // B starts once A holds the lease and has checkpointed (however slow the store).
    let mut a_started = false;
    for _ in 0..400 {
        let doc = tern_core::migrate::state::load(store.as_ref())
            .await
            .unwrap()
            .doc;
        if doc.lease.is_some() && doc.running.as_ref().is_some_and(|r| r.checkpoints > 0) {
            a_started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(a_started, "runner A took the lease and wrote a checkpoint");
    let rb = b.up(None).await;
    let ra = a_run.await.unwrap();
    assert!(matches!(ra, Err(MigrateError::LeaseLost { .. })), "{ra:?}");
    rb.unwrap();
    assert_eq!(export(store.as_ref()).await, expected);
}

pub async fn an_edited_applied_migration_is_refused_with_exit_4(backend: &dyn Backend) {
    let store: Arc<dyn Store> = backend.fresh().await;
    load(store.as_ref(), &blog(2, 1)).await;
    migrator(Arc::clone(&store), &[(1, RELEASE2)], 10)
        .up(None)
        .await
        .unwrap();
    let err = migrator(Arc::clone(&store), &[(1, "add blogpost.likes = 1\n")], 10)
        .up(None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::ChecksumMismatch { id: 1, .. }),
        "{err}"
    );
    assert_eq!(err.exit_code(), 4);
    // Formatting and comments do not count as edits.
    let same = "-- release 2\nadd   blogpost.likes=0 ;rename blogpost.text to content\n";
    assert!(
        migrator(Arc::clone(&store), &[(1, same)], 10)
            .up(None)
            .await
            .unwrap()
            .applied
            .is_empty()
    );
    // A missing applied migration and an out-of-order pending one are refused too.
    let err = migrator(Arc::clone(&store), &[], 10)
        .up(None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, MigrateError::MissingApplied { id: 1, .. }),
        "{err}"
    );
    migrator(
        Arc::clone(&store),
        &[(1, RELEASE2), (3, "delete user.email")],
        10,
    )
    .up(None)
    .await
    .unwrap();
    let err = migrator(
        Arc::clone(&store),
        &[
            (1, RELEASE2),
            (2, "delete user.url"),
            (3, "delete user.email"),
        ],
        10,
    )
    .up(None)
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            MigrateError::OutOfOrder {
                pending: 2,
                applied: 3
            }
        ),
        "{err}"
    );
}

pub async fn an_unsafe_copy_is_refused_with_the_conflicting_keys_and_writes_nothing(
    backend: &dyn Backend,
) {
    let store: Arc<dyn Store> = backend.fresh().await;
    let data = [
        Entity::new(
            Key::new("user", 1).unwrap(),
            map(&[("name", "ann".into()), ("url", "a".into())]),
        ),
        Entity::new(
            Key::new("user", 2).unwrap(),
            map(&[("name", "ann".into()), ("url", "b".into())]),
        ),
        Entity::new(
            Key::new("blogpost", 7).unwrap(),
            map(&[("author", "ann".into())]),
        ),
    ];
    load(store.as_ref(), &data).await;
    let before = export(store.as_ref()).await;
    let unsafe_copy = "copy user.url to blogpost where user.name = blogpost.author";
    let err = migrator(Arc::clone(&store), &[(1, unsafe_copy)], 10)
        .up(None)
        .await
        .unwrap_err();
    assert_eq!(err.exit_code(), 5);
    let MigrateError::Unsafe { conflicts, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(conflicts.len(), 1);
    assert!(
        conflicts[0].contains("blogpost:7")
            && conflicts[0].contains("user:1")
            && conflicts[0].contains("user:2"),
        "{err}"
    );
    assert_eq!(export(store.as_ref()).await, before, "nothing written");
    // The dry run reports it without refusing.
    let dry = migrator(Arc::clone(&store), &[(1, unsafe_copy)], 10)
        .dry_run(None, 3)
        .await
        .unwrap();
    assert_eq!(dry.conflicts.len(), 1);
    assert_eq!(
        export(store.as_ref()).await,
        before,
        "the dry run wrote nothing"
    );
    // Forced, the greatest source key wins.
    let forced = RunOptions {
        force_unsafe: true,
        ..opts(10)
    };
    migrator_with(Arc::clone(&store), set(&[(1, unsafe_copy)]), forced)
        .up(None)
        .await
        .unwrap();
    let post = stored(store.as_ref(), "blogpost", 7).await;
    assert_eq!(post.get("url"), Some(&Value::from("b")));
}

pub async fn dry_run_reports_counts_and_samples_without_writing(backend: &dyn Backend) {
    let store: Arc<dyn Store> = backend.fresh().await;
    load(store.as_ref(), &blog(4, 2)).await;
    let before = export(store.as_ref()).await;
    let dry = migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 3)
        .dry_run(None, 2)
        .await
        .unwrap();
    assert_eq!(export(store.as_ref()).await, before);
    assert!(dry.conflicts.is_empty());
    // 10 posts change in release 2 (8 + orphan + anonymous gets likes), users lose url in release 3.
    assert_eq!(dry.stages[0].counts.processed, 10);
    assert_eq!(dry.stages[0].counts.changed, 10);
    let kinds: BTreeSet<&str> = dry.samples.iter().map(|(k, _)| k.kind.as_str()).collect();
    assert_eq!(kinds, BTreeSet::from(["blogpost", "user"]));
    assert!(
        dry.samples
            .iter()
            .all(|(_, c)| c.before.is_some() && c.after.is_some())
    );
    // And a real run afterwards matches the dry run's count of changed entities.
    migrator(Arc::clone(&store), &[(1, RELEASE2), (2, RELEASE3)], 3)
        .up(None)
        .await
        .unwrap();
    let after = export(store.as_ref()).await;
    let changed = before
        .lines()
        .filter_map(|l| entity_from_json_line(l).ok())
        .filter(|e| {
            after
                .lines()
                .filter_map(|l| entity_from_json_line(l).ok())
                .find(|a| a.key == e.key)
                .is_some_and(|a| a.value != e.value)
        })
        .count() as u64;
    assert_eq!(changed, dry.changed_entities);
}

pub async fn code_migrations_run_as_version_steps_next_to_files(backend: &dyn Backend) {
    struct Upper;
    impl tern_core::migrate::EntityMigration for Upper {
        fn kind(&self) -> &str {
            "user"
        }
        fn transform(&self, _key: &Key, value: &mut Map) -> Result<bool, String> {
            match value.get("name") {
                Some(Value::String(s)) => {
                    let up = s.to_uppercase();
                    value.insert("name".into(), Value::String(up));
                    Ok(true)
                }
                _ => Ok(false),
            }
        }
    }
    let store: Arc<dyn Store> = backend.fresh().await;
    load(store.as_ref(), &blog(2, 0)).await;
    let mut s = set(&[(1, "add user.active = true")]);
    s.add(Migration::from_code(2, "upper", "r1", Arc::new(Upper)))
        .unwrap();
    migrator_with(Arc::clone(&store), s, RunOptions::default())
        .up(None)
        .await
        .unwrap();
    let u = stored(store.as_ref(), "user", "u0001").await;
    assert_eq!(u.version, 2);
    assert_eq!(u.get("name"), Some(&Value::from("USER1")));
    assert_eq!(u.get("active"), Some(&Value::Bool(true)));
}

/// The store contract itself ([`crate::conformance`]) on a fresh store.
pub async fn store_conformance(backend: &dyn Backend) {
    if let Err(failures) = crate::conformance::run_all(backend.fresh().await).await {
        panic!("{failures}");
    }
}

/// Records the outcome of one battery test for one backend: on stderr, and as a
/// file `<backend>.<test>` holding the line in the folder named by
/// `TERN_BATTERY_DIR` (CI sums them up per backend).
pub fn report(backend: &str, test: &str, outcome: &str) {
    let line = format!("BATTERY\t{backend}\t{test}\t{outcome}\n");
    eprint!("{line}");
    if let Some(dir) = std::env::var_os("TERN_BATTERY_DIR") {
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("{backend}.{test}")),
            line,
        );
    }
}

/// The backend a test runs on, or `None` after saying why the test is skipped.
///
/// `backend` gives the reason through `Err`. A test that the CI summary counts
/// (`counted` = `Some((backend label, test name))`) reports `skipped: <reason>`
/// through [`report`] (stderr and `TERN_BATTERY_DIR`); any other test prints
/// `skipped: <reason>` on stderr. Either way a skip is never silent.
pub async fn or_skip<B>(
    backend: impl std::future::Future<Output = Result<B, String>>,
    counted: Option<(&str, &str)>,
) -> Option<B> {
    match backend.await {
        Ok(backend) => Some(backend),
        Err(reason) => {
            let outcome = format!("skipped: {reason}");
            match counted {
                Some((label, test)) => report(label, test, &outcome),
                None => eprintln!("{outcome}"),
            }
            None
        }
    }
}

/// What a battery function gives: nothing (it passed, or it panicked), or, for a
/// capability the store may lack, `Err(reason)`.
pub trait Outcome {
    /// Why the test counts as skipped, if it does.
    fn skip_reason(self) -> Option<String>;
}

impl Outcome for () {
    fn skip_reason(self) -> Option<String> {
        None
    }
}

impl Outcome for Result<(), String> {
    fn skip_reason(self) -> Option<String> {
        self.err()
    }
}

/// Runs a battery function and reports it ([`report`]): `passed`, or `skipped: <reason>`.
pub async fn run_and_report<O: Outcome>(
    label: &str,
    test: &str,
    run: impl std::future::Future<Output = O>,
) {
    match run.await.skip_reason() {
        None => report(label, test, "passed"),
        Some(reason) => report(label, test, &format!("skipped: {reason}")),
    }
}

/// One `#[tokio::test]` a `$test`, running `$crate::$module::$test` on a backend, skipped
/// (and reported so) when the backend is not available here; used by
/// [`battery_tests!`], `lazy_battery_tests!` and `partition_tests!`. With
/// `around = f`, the test runs `f(run)` (a future wrapping the battery
/// function's, e.g. at a scale) instead.
#[doc(hidden)]
#[macro_export]
macro_rules! battery_test {
    ($module:ident, $label:expr, $backend:expr, [$($test:ident),* $(,)?]) => {
        $crate::battery_test!(
            $module, $label, $backend, around = ::std::convert::identity, [$($test),*]
        );
    };
    ($module:ident, $label:expr, $backend:expr, around = $around:expr, [$($test:ident),* $(,)?]) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let test = stringify!($test);
            let Some(backend) = $crate::battery::or_skip($backend, Some(($label, test))).await
            else {
                return;
            };
            let run = ($around)($crate::$module::$test(&backend));
            $crate::battery::run_and_report($label, test, run).await;
        }
    )*};
}

/// Generates one `#[tokio::test]` per battery function for a backend.
///
/// `$label` names the backend in reports (`"redis"`, `"mongodb"`...).
/// `$backend` is an async expression giving `Result<impl Backend, String>`:
/// `Err(reason)` means the backend is not available here, which is reported
/// as a skip ([`or_skip`]). Battery functions that return `Result<(), String>`
/// (the kind rename) report their `Err` as a skip too ([`Outcome`]): the store
/// lacks the capability, which they checked is refused cleanly.
///
/// Needs this crate's feature `fault-injection` (the crash tests inject
/// crashes): a crate's dev-dependency `tern-testkit = { ..., features =
/// ["fault-injection"] }`. Without it the macro does not exist, so a battery
/// never runs with its crash tests silently left out.
#[cfg(feature = "fault-injection")]
#[macro_export]
macro_rules! battery_tests {
    ($label:expr, $backend:expr) => {
        $crate::battery_test!(
            battery,
            $label,
            $backend,
            [
                blog_example_gives_the_exact_expected_entities,
                crash_at_every_batch_boundary_and_mid_batch_resumes_exactly,
                counts_are_exact_after_a_crash_where_checkpoints_commit_with_their_batch,
                a_concurrent_writer_loses_no_update_and_every_entity_reaches_the_target,
                late_entities_written_during_the_run_are_swept_by_the_census,
                two_runners_exactly_one_applies,
                a_runner_whose_lease_was_taken_over_stops_without_writing,
                an_edited_applied_migration_is_refused_with_exit_4,
                an_unsafe_copy_is_refused_with_the_conflicting_keys_and_writes_nothing,
                dry_run_reports_counts_and_samples_without_writing,
                code_migrations_run_as_version_steps_next_to_files,
                rename_kind_rekeys_every_entity_and_keeps_the_prefix_history,
                rename_kind_resumes_after_a_crash_at_every_fault_point,
                rename_kind_with_a_concurrent_writer_on_the_old_kind,
                rename_kind_never_overwrites_and_stops_on_a_namesake,
                store_conformance,
                an_export_is_a_backup_export_import_export_is_identical_in_a_new_store,
                importing_tern_state_into_a_non_empty_store_is_refused_unless_it_matches,
            ]
        );
    };
}

/// Generates one `#[tokio::test]` per test of the kind rename by copy
/// (`battery::rename_copy`) for a backend whose stores rename that way
/// ([`CopyRenameBackend`]); labels and skips as [`battery_tests!`]. Needs the
/// feature `fault-injection` (the tests act between a batch's copy and delete).
#[cfg(feature = "fault-injection")]
#[macro_export]
macro_rules! rename_copy_tests {
    ($label:expr, $backend:expr) => {
        $crate::battery_test!(
            battery,
            $label,
            $backend,
            [
                rename_by_copy_completes_a_move_interrupted_after_the_copy,
                rename_by_copy_reports_a_collision_and_overwrites_nothing,
                rename_by_copy_never_loses_an_update_made_between_copy_and_delete,
            ]
        );
    };
}
