//! What the move/copy benchmarks of every store share: N users and N blog
//! posts (post `i` written by user `i`, so each post joins exactly one user),
//! and the timed side-by-side run of `add` (the baseline: every post written
//! once), the safety check alone, `copy` and `move` through the join index.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::lang::{Statement, parse};
use tern_core::migrate::{
    LeaseOptions, MigrateError, Migration, MigrationSet, Migrator, NoProgress, RunOptions,
    check_on_store,
};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Error as StoreError, Store, Write};

/// The baseline: every post written once.
pub const ADD: &str = "add blogpost.likes = 0";
/// The baseline through the client path (no pushdown): every post read and
/// written back through the store interface, as the copy's target phase does.
pub const ADD_CLIENT: &str = "add blogpost.views = 0";
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
    super::bench::blog_post_by(i, i)
}

/// Loads users and posts `0..n`, in batches of 5,000, and prints (flushed)
/// how long it took.
///
/// # Errors
/// A store error.
pub async fn load(store: &dyn Store, n: usize) -> Result<(), StoreError> {
    const CHUNK: usize = 5_000;
    let started = Instant::now();
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        let writes = (start..end)
            .flat_map(|i| [Write::Put(user(i)), Write::Put(post(i))])
            .collect();
        store.write_batch(writes).await?;
        start = end;
    }
    println!(
        "loaded {n} users + {n} posts in {:.2}s",
        started.elapsed().as_secs_f64()
    );
    flush();
    Ok(())
}

/// Flushes standard output, so a line printed is seen before a long phase ends.
fn flush() {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
}

/// Prints the name of a phase about to start (flushed, no newline): a phase
/// that takes long is then named on the terminal while it runs.
fn phase_start(name: &str) {
    print!("  {name:<14}");
    flush();
}

/// Ends the line of [`phase_start`]: the phase's time, its ratio to the
/// baselines measured so far, and its peak resident memory (flushed).
fn phase_done(
    took: Duration,
    add: Option<Duration>,
    add_client: Option<Duration>,
    rss: Option<u64>,
) {
    let s = took.as_secs_f64();
    let mut line = format!("{s:>9.2}s");
    for (name, base) in [("add", add), ("client", add_client)] {
        if let Some(b) = base {
            line.push_str(&format!(
                "  {:>6.2}x {name}",
                s / b.as_secs_f64().max(f64::MIN_POSITIVE)
            ));
        }
    }
    if let Some(b) = rss {
        line.push_str(&format!("  peak RSS {} MB", b >> 20));
    }
    println!("{line}");
    flush();
}

/// The times of one side-by-side run.
#[derive(Debug, Clone, Copy)]
pub struct JoinTimes {
    /// Entities per kind.
    pub n: usize,
    /// `tern up` of [`ADD`] (with the store's pushdown, when it has one).
    pub add: Duration,
    /// `tern up` of [`ADD_CLIENT`] without pushdown.
    pub add_client: Duration,
    /// The safety check of [`COPY`] alone ([`check_on_store`]).
    pub check: Duration,
    /// `tern up` of [`COPY`] (its check included).
    pub copy: Duration,
    /// `tern up` of [`MOVE`] (its check included).
    pub mv: Duration,
    /// Peak resident memory of the process during each of add, add (client),
    /// check, copy and move, in bytes (Linux), if known. The peak is reset
    /// before each ([`reset_peak`]), so each shows what that phase needed,
    /// the store's own cache included.
    pub max_rss: [Option<u64>; 5],
}

impl JoinTimes {
    /// Prints the times and the ratios to the `add`.
    pub fn print(&self) {
        let s = |d: Duration| d.as_secs_f64();
        let r = |d: Duration| s(d) / s(self.add).max(f64::MIN_POSITIVE);
        let rc = |d: Duration| s(d) / s(self.add_client).max(f64::MIN_POSITIVE);
        println!(
            "n={:>8}  add {:>6.2}s  add(client) {:>6.2}s  check {:>6.2}s ({:.2}x add, {:.2}x client)  copy {:>6.2}s ({:.2}x, {:.2}x)  move {:>6.2}s ({:.2}x, {:.2}x)  peak RSS MB (add/client/check/copy/move) {}",
            self.n,
            s(self.add),
            s(self.add_client),
            s(self.check),
            r(self.check),
            rc(self.check),
            s(self.copy),
            r(self.copy),
            rc(self.copy),
            s(self.mv),
            r(self.mv),
            rc(self.mv),
            self.max_rss
                .iter()
                .map(|m| m.map_or_else(|| "?".to_owned(), |b| format!("{}", b >> 20)))
                .collect::<Vec<_>>()
                .join("/"),
        );
    }
}

/// Resets the peak resident memory of this process to its current size
/// (Linux: `5` into `/proc/self/clear_refs`), so that [`max_rss`] then tells
/// the peak of what follows.
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
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

/// On a store holding [`load`]`(n)`: `tern up` of [`ADD`], of [`ADD_CLIENT`]
/// without pushdown, then the safety
/// check of [`COPY`] alone, then `tern up` of [`COPY`] and of [`MOVE`], each timed.
/// Each phase prints its line (time, ratios to the `add`s, peak memory) as
/// soon as it ends, so a run stopped early still shows the phases it finished;
/// [`JoinTimes::print`] then sums them up in one line.
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
    set.add(migration(2, ADD_CLIENT)?)?;
    set.add(migration(3, COPY)?)?;
    set.add(migration(4, MOVE)?)?;
    let migrator = Migrator::new(Arc::clone(&store), set.clone())
        .with_run_options(options.clone())
        .with_lease_options(LeaseOptions::default());
    let client = Migrator::new(Arc::clone(&store), set)
        .with_run_options(RunOptions {
            pushdown: false,
            ..options.clone()
        })
        .with_lease_options(LeaseOptions::default());
    let timed_up = |to: u32, client_path: bool| {
        let migrator = if client_path { &client } else { &migrator };
        async move {
            let t = Instant::now();
            migrator.up(Some(to)).await?;
            Ok::<_, MigrateError>(t.elapsed())
        }
    };
    let mut max = [None; 5];
    phase_start("add");
    reset_peak();
    let add = timed_up(1, false).await?;
    max[0] = max_rss();
    phase_done(add, None, None, max[0]);
    phase_start("add (client)");
    reset_peak();
    let add_client = timed_up(2, true).await?;
    max[1] = max_rss();
    phase_done(add_client, Some(add), None, max[1]);
    let copy_stmt = parse(COPY)
        .ok()
        .and_then(|s| s.statements.into_iter().next())
        .map(|s| s.statement);
    let Some(Statement::Copy(t)) = copy_stmt else {
        return Err(MigrateError::Dirty(
            "the benchmark's copy does not parse".into(),
        ));
    };
    phase_start("check alone");
    reset_peak();
    let started = Instant::now();
    let found = check_on_store(store.as_ref(), &t, &options, &NoProgress).await?;
    let check = started.elapsed();
    max[2] = max_rss();
    phase_done(check, Some(add), Some(add_client), max[2]);
    if found.conflict_count > 0 {
        return Err(MigrateError::Dirty(format!(
            "the benchmark's copy is unsafe: {found:?}"
        )));
    }
    phase_start("copy");
    reset_peak();
    let copy = timed_up(3, false).await?;
    max[3] = max_rss();
    phase_done(copy, Some(add), Some(add_client), max[3]);
    phase_start("move");
    reset_peak();
    let mv = timed_up(4, false).await?;
    max[4] = max_rss();
    phase_done(mv, Some(add), Some(add_client), max[4]);
    Ok(JoinTimes {
        n,
        add,
        add_client,
        check,
        copy,
        mv,
        max_rss: max,
    })
}

/// What [`index_only`] measured.
#[derive(Debug, Clone, Copy)]
pub struct IndexProbe {
    /// Sources indexed (and targets looked up).
    pub n: usize,
    /// Time to build the index.
    pub build: Duration,
    /// Time to resolve every target against it.
    pub lookup: Duration,
    /// How many times it spilled to its scratch file.
    pub spills: u64,
    /// Peak resident memory of the process during the probe, if known.
    pub max_rss: Option<u64>,
}

/// The join index of [`COPY`] alone, without a store: [`user`]`(0..n)` indexed
/// within `budget` bytes, then [`post`]`(0..n)` resolved against it in pages of
/// 10,000, each checked to get its user's email. Shows the memory bound at
/// sizes no store in a test run holds.
///
/// # Errors
/// A failure of the scratch file, or a wrong resolution.
pub fn index_only(n: usize, budget: usize) -> Result<IndexProbe, MigrateError> {
    use tern_core::lang::eval::{EvalOptions, TargetResolution};
    use tern_core::migrate::JoinIndex;
    let Some(Statement::Copy(t)) = parse(COPY)
        .ok()
        .and_then(|s| s.statements.into_iter().next())
        .map(|s| s.statement)
    else {
        return Err(MigrateError::Dirty(
            "the benchmark's copy does not parse".into(),
        ));
    };
    reset_peak();
    let started = Instant::now();
    let mut index = JoinIndex::new(&t, &EvalOptions::default(), budget);
    for i in 0..n {
        index.add_source(&user(i))?;
    }
    index.finish()?;
    let build = started.elapsed();
    let started = Instant::now();
    const PAGE: usize = 10_000;
    let mut start = 0;
    while start < n {
        let page: Vec<Entity> = (start..(start + PAGE).min(n)).map(post).collect();
        let refs: Vec<&Entity> = page.iter().collect();
        for (i, resolved) in (start..).zip(index.resolve(&refs)?) {
            let ok = matches!(
                resolved.map(|r| r.resolution),
                Some(TargetResolution::Set { value: Value::String(ref s), .. }) if *s == format!("user{i}@example.com")
            );
            if !ok {
                return Err(MigrateError::Dirty(format!("post {i} resolved wrongly")));
            }
        }
        start += PAGE;
    }
    Ok(IndexProbe {
        n,
        build,
        lookup: started.elapsed(),
        spills: index.spills(),
        max_rss: max_rss(),
    })
}
