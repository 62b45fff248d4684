//! `tern import` and `tern export`: JSON Lines, one entity a line.

use std::io::{BufRead, BufWriter, Write as _};

use anyhow::Context;
use futures::TryStreamExt;
use tern_core::model::Entity;
use tern_core::model::json::{entity_from_json_line, entity_to_json_line};
use tern_core::store::{Filter, Write, scan_pages};

use crate::opt::{ExportArgs, ImportArgs};
use crate::{Ctx, EXIT_OK};

/// `tern import FILE`: create-or-replace every entity of the file, in batches.
///
/// # Errors
/// A malformed line (named by file and line number) or a store error. Lines
/// before the bad one's batch are written; the import can simply be re-run.
pub async fn import(ctx: &Ctx, args: &ImportArgs) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let name = args.file.display().to_string();
    let reader: Box<dyn BufRead> = if name == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let file =
            std::fs::File::open(&args.file).with_context(|| format!("cannot open {name}"))?;
        Box::new(std::io::BufReader::new(file))
    };
    let batch_size = args.batch_size.max(1);
    let mut batch = Vec::with_capacity(batch_size);
    let mut count = 0u64;
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {name}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let entity =
            entity_from_json_line(&line).map_err(|e| anyhow::anyhow!("{name}:{}: {e}", i + 1))?;
        batch.push(Write::Put(entity));
        if batch.len() >= batch_size {
            count += batch.len() as u64;
            store
                .write_batch(std::mem::take(&mut batch))
                .await
                .context("writing entities")?;
        }
    }
    if !batch.is_empty() {
        count += batch.len() as u64;
        store.write_batch(batch).await.context("writing entities")?;
    }
    if ctx.opt.json {
        println!("{}", serde_json::json!({"imported": count}));
    } else if !ctx.opt.quiet {
        eprintln!("imported {count} entities");
    }
    Ok(EXIT_OK)
}

/// `tern export [KIND...]`: every entity, sorted by kind then id.
///
/// # Errors
/// A store error or an unwritable output.
pub async fn export(ctx: &Ctx, args: &ExportArgs) -> anyhow::Result<u8> {
    let store = ctx.store().await?;
    let mut kinds = if args.kinds.is_empty() {
        store.kinds().await.context("listing kinds")?
    } else {
        args.kinds.clone()
    };
    kinds.sort();
    kinds.dedup();
    let out: Box<dyn std::io::Write> = match &args.output {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::new(out);
    let ordered = store.capability().scan_ordered;
    for kind in kinds {
        let mut buffered: Vec<Entity> = Vec::new();
        let mut pages = std::pin::pin!(scan_pages(store.as_ref(), &kind, Filter::all(), 1000));
        while let Some(page) = pages
            .try_next()
            .await
            .with_context(|| format!("scanning kind {kind}"))?
        {
            if ordered {
                for e in &page.entities {
                    writeln!(out, "{}", entity_to_json_line(e))?;
                }
            } else {
                buffered.extend(page.entities);
            }
        }
        if !ordered {
            buffered.sort_by(|a, b| a.key.cmp(&b.key));
            buffered.dedup_by(|a, b| a.key == b.key);
            for e in &buffered {
                writeln!(out, "{}", entity_to_json_line(e))?;
            }
        }
    }
    out.flush()?;
    Ok(EXIT_OK)
}
