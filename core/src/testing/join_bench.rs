//! What the move/copy benchmarks of every store share: N users and N blog
//! posts (post `i` written by user `i`, so each post joins exactly one user),
//! and the timed side-by-side run of `add` (the baseline: every post written
//! once), the safety check alone, `copy` and `move` through the join index.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lang::{Statement, parse};
use crate::migrate::{
    LeaseOptions, MigrateError, Migration, MigrationSet, Migrator, NoProgress, RunOptions,
    check_on_store,
};
use crate::model::{Entity, Key, Map, Value};
use crate::store::{Error as StoreError, Store, Write};

/// The baseline: every post written once.
pub const ADD: &str = "add blogpost.likes = 0";
/// The copy measured.
pub const COPY: &str = "copy user.email to blogpost where user.name = blogpost.author";
/// The matching move.
pub const MOVE: &str = "move user.url to blogpost where user.name = blogpost.author";

/// User `i`: `name`, `email`, `url`.
pub fn user(i: usize) -> Entity {
    let mut v = Map::new();
    v.insert("name".into(), Value::from(format!("user{i}")));
    v.insert("email".into(), Value::from(format!("user{i}@example.com")));
    v.insert(
        "url".into(),
        Value::from(format!("https://example.com/~user{i}")),
    );
    Entity::new(
        Key {
            kind: "user".into(),
            id: Value::Int(i as i64),
        },
        v,
    )
}

/// Post `i`, written by user `i`.
pub fn post(i: usize) -> Entity {
    let mut v = Map::new();
    v.insert("title".into(), Value::from(format!("post number {i}")));
    v.insert("text".into(), Value::from(super::bench::TEXT));
    v.insert("author".into(), Value::from(format!("user{i}")));
    Entity::new(
        Key {
            kind: "blogpost".into(),
            id: Value::Int(i as i64),
        },
        v,
    )
}

/// Loads users and posts `0..n`, in batches of 5,000.
///
/// # Errors
/// A store error.
pub async fn load(store: &dyn Store, n: usize) -> Result<(), StoreError> {
    const CHUNK: usize = 5_000;
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        let writes = (start..end)
            .flat_map(|i| [Write::Put(user(i)), Write::Put(post(i))])
            .collect();
        store.write_batch(writes).await?;
        start = end;
    }
    Ok(())
}

/// The times of one side-by-side run.
#[derive(Debug, Clone, Copy)]
pub struct JoinTimes {
    /// Entities per kind.
    pub n: usize,
    /// `tern up` of [`ADD`].
    pub add: Duration,
    /// The safety check of [`COPY`] alone ([`check_on_store`]).
    pub check: Duration,
    /// `tern up` of [`COPY`] (its check included).
    pub copy: Duration,
    /// `tern up` of [`MOVE`] (its check included).
    pub mv: Duration,
    /// Peak resident memory of the process so far, in bytes (Linux), if known.
    pub max_rss: Option<u64>,
}

impl JoinTimes {
    /// Prints the times and the ratios to the `add`.
    pub fn print(&self) {
        let s = |d: Duration| d.as_secs_f64();
        let r = |d: Duration| s(d) / s(self.add).max(f64::MIN_POSITIVE);
        println!(
            "n={:>8}  add {:>7.2}s  check {:>7.2}s ({:.2}x)  copy {:>7.2}s ({:.2}x)  move {:>7.2}s ({:.2}x)  max RSS {}",
            self.n,
            s(self.add),
            s(self.check),
            r(self.check),
            s(self.copy),
            r(self.copy),
            s(self.mv),
            r(self.mv),
            self.max_rss
                .map_or_else(|| "?".to_owned(), |b| format!("{} MB", b >> 20)),
        );
    }
}

/// The peak resident memory of this process (`VmHWM`), where `/proc` tells.
pub fn max_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn migration(id: u32, text: &str) -> Result<Migration, MigrateError> {
    Migration::from_script(id, "bench", "bench.tern", text)
}

/// On a store holding [`load`]`(n)`: `tern up` of [`ADD`], then the safety
/// check of [`COPY`] alone, then `tern up` of [`COPY`] and of [`MOVE`], each timed.
///
/// # Errors
/// A migration error.
pub async fn run(
    store: Arc<dyn Store>,
    n: usize,
    options: RunOptions,
) -> Result<JoinTimes, MigrateError> {
    let mut set = MigrationSet::new();
    set.add(migration(1, ADD)?)?;
    set.add(migration(2, COPY)?)?;
    set.add(migration(3, MOVE)?)?;
    let migrator = Migrator::new(Arc::clone(&store), set)
        .with_run_options(options.clone())
        .with_lease_options(LeaseOptions::default());
    let timed_up = |to: u32| {
        let migrator = &migrator;
        async move {
            let t = Instant::now();
            migrator.up(Some(to)).await?;
            Ok::<_, MigrateError>(t.elapsed())
        }
    };
    let add = timed_up(1).await?;
    let copy_stmt = parse(COPY)
        .ok()
        .and_then(|s| s.statements.into_iter().next())
        .map(|s| s.statement);
    let Some(Statement::Copy(t)) = copy_stmt else {
        return Err(MigrateError::Dirty(
            "the benchmark's copy does not parse".into(),
        ));
    };
    let started = Instant::now();
    let found = check_on_store(store.as_ref(), &t, &options, &NoProgress).await?;
    let check = started.elapsed();
    if found.conflict_count > 0 {
        return Err(MigrateError::Dirty(format!(
            "the benchmark's copy is unsafe: {found:?}"
        )));
    }
    let copy = timed_up(2).await?;
    let mv = timed_up(3).await?;
    Ok(JoinTimes {
        n,
        add,
        check,
        copy,
        mv,
        max_rss: max_rss(),
    })
}
