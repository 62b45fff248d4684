//! `tern import` and `tern export`: JSON Lines, one entity a line.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufWriter, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use tern_core::backup::{self, BackupError, ExportOptions, ImportLine, ImportOptions, Importer};
use tern_core::model::Key;
use tern_core::store::{Store, Write};

use crate::opt::{ExportArgs, ImportArgs};
use crate::{Ctx, EXIT_OK};

/// The longest message about one import line (a line may be megabytes long,
/// and its error must not echo it).
const MAX_LINE_MESSAGE: usize = 300;

/// `tern import FILE`: create-or-replace every entity of the file, in batches.
///
/// A repeated (kind, id) is warned about and counted once (the later line
/// wins, as it would in a re-run); a version above the kind's current version
/// is refused (tern would never migrate such an entity).
///
/// # Errors
/// A malformed line (named by file and line number) or a store error. Not all
/// or nothing: the batches before the bad line are written, and the message
/// says how many entities that is; fixing the line and re-running the import
/// replaces them with the same values.
pub async fn import(ctx: &Ctx, args: &ImportArgs) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let mut importer = Importer::new(
        store.as_ref(),
        ImportOptions {
            ignore_state: args.no_state,
        },
    )
    .await?;
    let name = args.file.display().to_string();
    let mut reader: Box<dyn BufRead> = if name == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let file =
            std::fs::File::open(&args.file).with_context(|| format!("cannot open {name}"))?;
        Box::new(std::io::BufReader::new(file))
    };
    let batch_size = args.batch_size.max(1);
    let mut batch = Vec::with_capacity(batch_size);
    let mut written = 0u64;
    let mut seen: HashMap<Key, u64> = HashMap::new();
    let mut repeated = 0u64;
    let mut raw = Vec::new();
    let mut line_no = 0u64;
    loop {
        raw.clear();
        let n = reader
            .read_until(b'\n', &mut raw)
            .with_context(|| format!("cannot read {name}"))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let entity = match importer.line(store.as_ref(), &raw, line_no).await {
            Ok(ImportLine::Entity(entity)) => entity,
            Ok(ImportLine::State(restored)) => {
                tracing::info!(?restored, "tern's state of the file restored");
                continue;
            }
            Ok(ImportLine::StateIgnored) => {
                crate::errln!(
                    "note: {name}:1: tern's state record skipped (--no-state); the entities are checked against this store's versions"
                );
                continue;
            }
            Ok(_) => continue,
            Err(e @ (BackupError::Line(_) | BackupError::StateRefused(_))) => {
                return Err(partial_import_error(
                    &name,
                    line_no,
                    &e.to_string(),
                    written,
                ));
            }
            Err(e) => return Err(anyhow::Error::from(e).context(format!("{name}:{line_no}"))),
        };
        if let Some(first) = seen.insert(entity.key.clone(), line_no) {
            repeated += 1;
            if repeated <= 10 {
                crate::errln!(
                    "warning: {name}:{line_no}: {} is also on line {first}; the later line wins",
                    entity.key
                );
            }
            // Written in a batch of its own order: flush first so the later line wins.
            if batch
                .iter()
                .any(|w| matches!(w, Write::Put(e) if e.key == entity.key))
            {
                written += flush(store.as_ref(), &mut batch).await?;
            }
        }
        batch.push(Write::Put(entity));
        if batch.len() >= batch_size {
            written += flush(store.as_ref(), &mut batch).await?;
        }
    }
    written += flush(store.as_ref(), &mut batch).await?;
    drop(importer);
    check_after_import(ctx, store).await?;
    report_import(ctx, written - repeated, repeated);
    Ok(EXIT_OK)
}

/// Checks an embedded store's file against its page checksums once an
/// import has written it (issue 34 item 1): the store is closed, then opened
/// again with redb's integrity check, so that an import is never reported
/// done into a file that does not read back intact. Other stores: nothing.
///
/// # Errors
/// The check's, naming the file and what to do.
async fn check_after_import(ctx: &Ctx, store: Arc<dyn Store>) -> anyhow::Result<()> {
    let url = ctx.store_url()?;
    if crate::connect::embedded_path(url)?.is_none() {
        return Ok(());
    }
    drop(store);
    ctx.store()
        .await
        .context("the import was written, but the store's integrity check after it failed")?;
    Ok(())
}

/// Prints what an import did: `count` entities, `repeated` lines repeating one.
fn report_import(ctx: &Ctx, count: u64, repeated: u64) {
    if repeated > 10 {
        crate::errln!("warning: {repeated} lines repeat an entity of an earlier line in all");
    }
    if ctx.opt.json {
        crate::outln!(
            "{}",
            serde_json::json!({"imported": count, "repeated_lines": repeated})
        );
    } else if !ctx.opt.quiet {
        crate::errln!("imported {count} entities");
    }
}

/// Writes and empties `batch`; the number of entities written.
async fn flush(store: &dyn Store, batch: &mut Vec<Write>) -> anyhow::Result<u64> {
    if batch.is_empty() {
        return Ok(0);
    }
    let n = batch.len() as u64;
    store
        .write_batch(std::mem::take(batch))
        .await
        .context("writing entities")?;
    Ok(n)
}

fn partial_import_error(name: &str, line: u64, message: &str, written: u64) -> anyhow::Error {
    let message = if message.chars().count() > MAX_LINE_MESSAGE {
        let head: String = message.chars().take(MAX_LINE_MESSAGE).collect();
        format!("{head}...")
    } else {
        message.to_owned()
    };
    let partial = if written == 0 {
        "nothing was imported".to_owned()
    } else {
        format!(
            "the entities of the {written} lines before it were imported (an import is not all or nothing); \
             fix the line and run the import again (it writes them again with the same values)"
        )
    };
    anyhow::anyhow!("{name}:{line}: {message}; {partial}")
}

/// `tern export [KIND...]`: every entity, sorted by kind then id.
///
/// With `-o FILE` the export goes to a temporary file beside FILE, renamed
/// over it once complete: FILE is never left half written, and an output
/// path that is the open store file itself is refused.
///
/// # Errors
/// A store error or an unwritable output.
pub async fn export(ctx: &Ctx, args: &ExportArgs) -> anyhow::Result<u8> {
    if let (Some(out), Ok(url)) = (&args.output, ctx.store_url())
        && let Some(store_path) = crate::connect::embedded_path(url)?
        && same_file(Path::new(store_path), out)
    {
        bail!(
            "refusing to write the export to {}: it is the store file itself (writing it would destroy the store); choose another file",
            out.display()
        );
    }
    if let Some(out) = &args.output {
        refuse_unless_regular_or_new(out)?;
    }
    let store = ctx.store().await?;
    let mut kinds = if args.kinds.is_empty() {
        store.kinds().await.context("listing kinds")?
    } else {
        args.kinds.clone()
    };
    kinds.sort();
    kinds.dedup();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let options = ExportOptions {
        // A backup is the whole store: an export of named kinds is their entities alone.
        state: !args.no_state && args.kinds.is_empty(),
        sort_memory: usize::try_from(args.sort_memory.saturating_mul(1 << 20))
            .unwrap_or(usize::MAX),
        ..ExportOptions::default()
    };
    match &args.output {
        Some(path) => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let tmp = tempfile::Builder::new()
                .prefix(".tern-export-")
                .tempfile_in(dir)
                .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
            let mut out = BufWriter::new(tmp.as_file());
            write_kinds(store.as_ref(), &kinds, &mut out, &mut counts, &options).await?;
            out.flush()?;
            drop(out);
            tmp.as_file()
                .sync_all()
                .with_context(|| format!("cannot write {}", path.display()))?;
            tmp.persist(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
        }
        None => {
            let mut out = BufWriter::new(std::io::stdout().lock());
            let written =
                match write_kinds(store.as_ref(), &kinds, &mut out, &mut counts, &options).await {
                    Ok(()) => out.flush().map_err(anyhow::Error::from),
                    Err(e) => Err(e),
                };
            // A reader that stops early (`tern export | head`) is not an error.
            if let Err(e) = written {
                let closed = e.chain().any(|c| {
                    c.downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
                });
                if !closed {
                    return Err(e);
                }
                return Ok(EXIT_OK);
            }
        }
    }
    if ctx.opt.json && args.output.is_some() {
        let total: u64 = counts.values().sum();
        crate::outln!(
            "{}",
            serde_json::json!({"exported": total, "kinds": counts,
                "file": args.output.as_ref().map(|p| p.display().to_string())})
        );
    }
    Ok(EXIT_OK)
}

async fn write_kinds(
    store: &dyn Store,
    kinds: &[String],
    out: &mut dyn std::io::Write,
    counts: &mut BTreeMap<String, u64>,
    options: &ExportOptions,
) -> anyhow::Result<()> {
    let report = backup::export(store, kinds, out, options).await?;
    if report.spilled > 0 {
        tracing::info!(
            lines = report.spilled,
            "the export's sort went through temporary files"
        );
    }
    *counts = report.counts;
    Ok(())
}

/// `export -o PATH` writes only to a new path or an existing regular file:
/// the export is written to a temporary file renamed over `path`, which would
/// replace a device node (`/dev/full`, as root), a FIFO or a symbolic link (the
/// link, not its target) with a plain file.
fn refuse_unless_regular_or_new(path: &Path) -> anyhow::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(());
    }
    let what = if ft.is_symlink() {
        "a symbolic link (the export would replace the link, not write its target)"
    } else if ft.is_dir() {
        "a folder"
    } else {
        "not a regular file (a device, FIFO or socket; the export would replace it with a file)"
    };
    bail!(
        "refusing to write the export to {}: it is {what}; name a new file or an existing regular file, or write to stdout (`tern export > PATH`)",
        path.display()
    )
}

/// Whether `a` and `b` name the same existing file (after links: the same
/// device and inode on Unix, the same canonical path elsewhere).
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return ma.dev() == mb.dev() && ma.ino() == mb.ino();
        }
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(ca), Ok(cb)) => ca == cb,
        _ => false,
    }
}
