//! What the eager benchmarks of every store share: the arguments, the blog-post
//! data set, the migration tern runs (`add` + `rename`), the side-by-side timing
//! and the printed ratios. Each benchmark keeps only its store's baseline loop.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::migrate::{
    LeaseOptions, MigrateError, Migration, MigrationSet, Migrator, RunOptions,
};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Error as StoreError, Store, Write};

/// The migration every eager benchmark runs.
pub const SCRIPT: &str = "add blogpost.likes = 0\nrename blogpost.text to content\n";

/// The `text` of every generated blog post.
pub const TEXT: &str = "NoSQL databases are often schema-less; their data is not.";

/// The median of `values` (the upper one of an even count; `None` when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// The CPU time this process has used so far, all its threads together
/// (Linux's `/proc/self/task/*/schedstat`, in nanoseconds); `None` where it
/// cannot be read. A thread that has ended no longer counts (one that ends
/// while the threads are read is skipped), so measure between two calls
/// while the same threads run (a tokio runtime's workers), and subtract
/// with `saturating_sub`.
pub fn process_cpu() -> Option<Duration> {
    let mut total = 0_u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(text) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue;
        };
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// Command-line arguments of a benchmark: `--entities N`, `--batch N`,
/// `--rounds N`, `--no-pushdown`, and whatever else the benchmark asks for with
/// [`BenchArgs::flag`] and [`BenchArgs::value`] (`cargo bench`'s own `--bench`
/// is ignored).
#[derive(Debug, Clone)]
pub struct BenchArgs {
    /// Entities loaded per round.
    pub entities: usize,
    /// Batch size of tern and of the baseline loop.
    pub batch: usize,
    /// Rounds run side by side.
    pub rounds: usize,
    /// Whether tern may push steps down into the server.
    pub pushdown: bool,
    rest: Vec<String>,
}

impl BenchArgs {
    /// Parses the process arguments over the given defaults.
    ///
    /// # Panics
    /// When a numeric option is not followed by a number (a benchmark fails loudly).
    pub fn parse(entities: usize, rounds: usize) -> Self {
        Self::parse_from(std::env::args().skip(1), entities, rounds)
    }

    /// [`BenchArgs::parse`] over explicit arguments.
    ///
    /// # Panics
    /// When a numeric option is not followed by a number.
    pub fn parse_from(
        args: impl IntoIterator<Item = String>,
        entities: usize,
        rounds: usize,
    ) -> Self {
        let mut a = BenchArgs {
            entities,
            batch: 1000,
            rounds,
            pushdown: true,
            rest: Vec::new(),
        };
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let mut num = |name: &str| -> usize {
                match it.next().and_then(|v| v.parse().ok()) {
                    Some(n) => n,
                    None => panic!("{name} needs a number"),
                }
            };
            match arg.as_str() {
                "--entities" => a.entities = num("--entities"),
                "--batch" => a.batch = num("--batch"),
                "--rounds" => a.rounds = num("--rounds"),
                "--no-pushdown" => a.pushdown = false,
                "--bench" => {}
                _ => a.rest.push(arg),
            }
        }
        a
    }

    /// Whether `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.rest.iter().any(|a| a == name)
    }

    /// The value that follows `--name`, if given.
    pub fn value(&self, name: &str) -> Option<&str> {
        let at = self.rest.iter().position(|a| a == name)?;
        self.rest.get(at + 1).map(String::as_str)
    }
}

/// Blog post number `i`: `title`, `text` and `author`, id `i`, version 0.
pub fn blog_post(i: usize) -> Entity {
    blog_post_by(i, i % 1000)
}

/// Blog post number `i` written by `user<author>`.
pub fn blog_post_by(i: usize, author: usize) -> Entity {
    let mut v = Map::new();
    v.insert("title".into(), Value::from(format!("post number {i}")));
    v.insert("text".into(), Value::from(TEXT));
    v.insert("author".into(), Value::from(format!("user{author}")));
    Entity::new(
        Key {
            kind: "blogpost".into(),
            id: Value::Int(i as i64),
        },
        v,
    )
}

/// Loads blog posts `0..n` through the store interface, in batches of 5,000.
pub async fn load(store: &dyn Store, n: usize) -> Result<(), StoreError> {
    const CHUNK: usize = 5_000;
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        let writes = (start..end).map(|i| Write::Put(blog_post(i))).collect();
        store.write_batch(writes).await?;
        start = end;
    }
    Ok(())
}

/// Runs [`SCRIPT`] with `tern up` (lease, checkpoint per batch, census) and
/// returns how many entities it processed. Client and pushdown batches are
/// both `batch` entities.
pub async fn tern_up(
    store: Arc<dyn Store>,
    batch: usize,
    pushdown: bool,
) -> Result<u64, MigrateError> {
    tern_up_with(
        store,
        RunOptions {
            batch_size: batch,
            pushdown_batch_size: batch,
            pushdown,
            ..RunOptions::default()
        },
    )
    .await
}

/// [`tern_up`] with explicit run options (e.g. `estimate_totals: false`, as the
/// command line runs without a progress bar).
pub async fn tern_up_with(store: Arc<dyn Store>, options: RunOptions) -> Result<u64, MigrateError> {
    let mut set = MigrationSet::new();
    set.add(Migration::from_script(
        1,
        "release2",
        "0001_release2.tern",
        SCRIPT,
    )?)?;
    let report = Migrator::new(store, set)
        .with_run_options(options)
        .with_lease_options(LeaseOptions::default())
        .up(None)
        .await?;
    Ok(report.applied.first().map_or(0, |m| m.counts.processed))
}

/// Awaits `f` and returns its output with the time it took.
pub async fn timed<F: Future>(f: F) -> (F::Output, Duration) {
    let t = Instant::now();
    let out = f.await;
    (out, t.elapsed())
}

/// Runs the baseline and tern one after the other, the baseline first in even
/// rounds and tern first in odd ones, so neither always meets the warmer cache.
pub async fn in_turn<A: Future, B: Future>(
    round: usize,
    baseline: A,
    tern: B,
) -> ((A::Output, Duration), (B::Output, Duration)) {
    if round.is_multiple_of(2) {
        let a = timed(baseline).await;
        let b = timed(tern).await;
        (a, b)
    } else {
        let b = timed(tern).await;
        let a = timed(baseline).await;
        (a, b)
    }
}

/// Entities per second.
pub fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// The time ratios of tern to the baseline, printed round by round and as a median.
#[derive(Debug, Default)]
pub struct Ratios {
    baseline: String,
    ratios: Vec<f64>,
}

impl Ratios {
    /// Ratios against the baseline called `baseline` in the printed lines.
    pub fn new(baseline: impl Into<String>) -> Self {
        Ratios {
            baseline: baseline.into(),
            ratios: Vec::new(),
        }
    }

    /// Prints one round and records its ratio.
    pub fn record(&mut self, round: usize, baseline: (u64, Duration), tern: (u64, Duration)) {
        let ratio = tern.1.as_secs_f64() / baseline.1.as_secs_f64().max(f64::MIN_POSITIVE);
        self.ratios.push(ratio);
        println!(
            "round {}: {} {:>7.2}s ({:>9.0}/s)   tern up {:>7.2}s ({:>9.0}/s)   tern/{} {:.3}",
            round + 1,
            self.baseline,
            baseline.1.as_secs_f64(),
            rate(baseline.0, baseline.1),
            tern.1.as_secs_f64(),
            rate(tern.0, tern.1),
            self.baseline,
            ratio
        );
    }

    /// The median ratio so far (`None` before the first round).
    pub fn median(&self) -> Option<f64> {
        median(&self.ratios)
    }

    /// Prints the median ratio.
    pub fn finish(&self) {
        if let Some(m) = self.median() {
            println!("median tern/{} time ratio: {m:.3}", self.baseline);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_override_defaults_and_keep_the_rest() {
        let a = BenchArgs::parse_from(
            [
                "--bench",
                "--entities",
                "10",
                "--lwt-loop",
                "--tool",
                "x",
                "--no-pushdown",
            ]
            .map(String::from),
            5,
            3,
        );
        assert_eq!(
            (a.entities, a.batch, a.rounds, a.pushdown),
            (10, 1000, 3, false)
        );
        assert!(a.flag("--lwt-loop"));
        assert_eq!(a.value("--tool"), Some("x"));
        assert_eq!(a.value("--missing"), None);
    }

    #[test]
    fn process_cpu_grows_with_work_done() {
        let Some(before) = process_cpu() else {
            println!("skipped: no /proc/self/task/*/schedstat on this system");
            return;
        };
        // Busy until 20 ms of CPU are counted (a loaded machine only makes it
        // take longer); it never gets there if work is not counted.
        let t = Instant::now();
        let mut x = 1_u64;
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(20) && t.elapsed() < Duration::from_secs(20) {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            // Other tests' threads end meanwhile: their time leaves the sum.
            used = process_cpu().unwrap().saturating_sub(before);
        }
        assert!(
            used >= Duration::from_millis(20),
            "{used:?} in {:?}",
            t.elapsed()
        );
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        let mut r = Ratios::new("loop");
        assert_eq!(r.median(), None);
        for (i, t) in [3u64, 1, 2].into_iter().enumerate() {
            r.record(i, (1, Duration::from_secs(1)), (1, Duration::from_secs(t)));
        }
        assert_eq!(r.median(), Some(2.0));
    }
}
