//! Peak memory of `tern export` against the number of entities of one kind on
//! a store that does not scan in id order (Redis, MongoDB, Cassandra): the
//! export's external sort ([`tern_core::backup::export`], 32 MiB of lines in
//! memory) against the baseline, the sort in memory that `tern export` did
//! before (every entity of the kind collected, sorted, de-duplicated).
//!
//! Each measurement runs in a process of its own (this binary, run again with
//! `--child`), so its peak resident memory (`VmHWM` of `/proc/self/status`) is
//! its own. The store is synthetic: it generates the entities of each page
//! (ids in a scrambled order, ~120 bytes of properties) and holds nothing, so
//! the memory measured is the export's.
//!
//! ```sh
//! cargo bench -p tern-core --bench export_memory -- --entities 100000,1000000,3000000
//! ```

#![allow(clippy::expect_used, clippy::panic, missing_docs)] // a benchmark: any failure should stop it loudly

use std::process::Command;
use std::time::Instant;

use async_trait::async_trait;
use tern_core::backup::{ExportOptions, export};
use tern_core::model::json::entity_to_json_line;
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{
    Cursor, Error, MetaCas, MetaChange, MetaEntry, Result, ScanPage, ScanRequest, Store, StoreInfo,
    Write, WriteOutcome, scan_pages,
};

/// The external sort's memory budget in the measurement.
const SORT_MEMORY: usize = 32 << 20;

/// A read-only store of `n` generated entities of kind `k`, scanned in a
/// scrambled id order (as a hash-ordered store would), with no metadata.
#[derive(Debug)]
struct Generated {
    n: u64,
}

impl Generated {
    fn entity(&self, i: u64) -> Entity {
        // A multiplier coprime with n visits every id once, out of order.
        let id = (i.wrapping_mul(2_654_435_761) % self.n) as i64;
        let mut value = Map::new();
        value.insert(
            "name".to_owned(),
            Value::String(format!("user number {id}")),
        );
        value.insert(
            "email".to_owned(),
            Value::String(format!("user{id}@mail.example.org")),
        );
        value.insert("score".to_owned(), Value::Int(id * 7));
        value.insert(
            "bio".to_owned(),
            Value::String("a few words about this user, the same for all".to_owned()),
        );
        let mut e = Entity::new(Key::new("k", Value::Int(id)).expect("key"), value);
        e.version = 3;
        e
    }
}

#[async_trait]
impl Store for Generated {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            scheme: "memory",
            location: "generated".to_owned(),
        }
    }
    async fn kinds(&self) -> Result<Vec<String>> {
        Ok(vec!["k".to_owned()])
    }
    async fn scan(&self, _kind: &str, request: ScanRequest) -> Result<ScanPage> {
        let start: u64 = request
            .cursor
            .map(|c| c.0.parse().expect("cursor"))
            .unwrap_or(0);
        let end = (start + request.limit as u64).min(self.n);
        Ok(ScanPage {
            entities: (start..end).map(|i| self.entity(i)).collect(),
            cursor: (end < self.n).then(|| Cursor(end.to_string())),
        })
    }
    async fn get(&self, _key: &Key) -> Result<Option<Entity>> {
        Err(Error::unsupported("generated", "get"))
    }
    async fn write_batch(&self, _writes: Vec<Write>) -> Result<Vec<WriteOutcome>> {
        Err(Error::unsupported("generated", "write_batch"))
    }
    async fn meta_get(&self, _name: &str) -> Result<Option<MetaEntry>> {
        Ok(None)
    }
    async fn meta_cas(&self, _name: &str, _change: MetaChange<'_>) -> Result<MetaCas> {
        Err(Error::unsupported("generated", "meta_cas"))
    }
    async fn meta_list(&self, _prefix: &str) -> Result<Vec<String>> {
        Ok(Vec::new())
    }
}

/// The baseline: `tern export`'s sort before issue 34, every entity in memory.
async fn in_memory(store: &dyn Store, out: &mut dyn std::io::Write) -> u64 {
    use futures::TryStreamExt as _;
    let mut buffered: Vec<Entity> = Vec::new();
    let mut pages = std::pin::pin!(scan_pages(
        store,
        "k",
        tern_core::store::Filter::all(),
        1000
    ));
    while let Some(page) = pages.try_next().await.expect("scan") {
        buffered.extend(page.entities);
    }
    buffered.sort_by(|a, b| a.key.cmp(&b.key));
    buffered.dedup_by(|a, b| a.key == b.key);
    for e in &buffered {
        writeln!(out, "{}", entity_to_json_line(e)).expect("write");
    }
    buffered.len() as u64
}

/// The peak resident memory of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// One measurement in this process: prints `lines seconds peak_kib`.
fn child(mode: &str, n: u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let store = Generated { n };
    // The export goes to a file, as `tern export -o` writes it (a hash of it
    // checks both sides wrote the same bytes).
    let mut out = HashingSink::default();
    let started = Instant::now();
    let lines = rt.block_on(async {
        match mode {
            "baseline" => in_memory(&store, &mut out).await,
            "external" => {
                let options = ExportOptions {
                    sort_memory: SORT_MEMORY,
                    ..ExportOptions::default()
                };
                let report = export(&store, &["k".to_owned()], &mut out, &options)
                    .await
                    .expect("export");
                report.counts["k"]
            }
            other => panic!("unknown mode {other}"),
        }
    });
    println!(
        "{lines} {:.2} {} {:016x}",
        started.elapsed().as_secs_f64(),
        peak_rss_kib(),
        out.hash
    );
}

/// Keeps nothing: an FNV-1a hash of the bytes written (both sides must agree).
struct HashingSink {
    hash: u64,
}

impl Default for HashingSink {
    fn default() -> Self {
        HashingSink {
            hash: 0xcbf2_9ce4_8422_2325,
        }
    }
}

impl std::io::Write for HashingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for b in buf {
            self.hash = (self.hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs one measurement in a new process: (lines, seconds, peak KiB, hash).
fn measure(mode: &str, n: u64) -> (u64, f64, u64, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args(["--child", mode, &n.to_string()])
        .output()
        .expect("run child");
    assert!(
        out.status.success(),
        "{mode} {n}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    (
        f[0].parse().expect("lines"),
        f[1].parse().expect("seconds"),
        f[2].parse().expect("kib"),
        f[3].to_owned(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], args[i + 2].parse().expect("count"));
        return;
    }
    let counts: Vec<u64> = args
        .iter()
        .position(|a| a == "--entities")
        .map(|i| {
            args[i + 1]
                .split(',')
                .map(|n| n.parse().expect("--entities N,N,..."))
                .collect()
        })
        .unwrap_or_else(|| vec![100_000, 1_000_000]);
    println!(
        "export of one unordered kind, external sort budget {} MiB (peak RSS, each side its own process)",
        SORT_MEMORY >> 20
    );
    println!(
        "{:>10} | {:>14} {:>8} | {:>14} {:>8} | {:>11}",
        "entities", "baseline MiB", "s", "external MiB", "s", "memory ratio"
    );
    for n in counts {
        let (bl, bs, bk, bh) = measure("baseline", n);
        let (el, es, ek, eh) = measure("external", n);
        assert_eq!((bl, &bh), (el, &eh), "both sides export the same lines");
        println!(
            "{n:>10} | {:>14.1} {bs:>8.2} | {:>14.1} {es:>8.2} | {:>10.2}x",
            bk as f64 / 1024.0,
            ek as f64 / 1024.0,
            bk as f64 / ek as f64
        );
    }
}
