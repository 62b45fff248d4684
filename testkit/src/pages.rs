//! A kind scanned page by page the way a resumed run reads it, for adapter tests.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use crate::intercept::Forward as _;
use tern_core::model::{Entity, Key, Value};
use tern_core::store::{Cursor, Filter, ScanPage, ScanRequest, Store};

/// One page (at most `limit`) of the entities of `kind` that pass `filter`,
/// from `cursor`.
///
/// # Errors
/// The store's.
pub async fn page_of(
    store: &dyn Store,
    kind: &str,
    filter: &Filter,
    cursor: Option<Cursor>,
    limit: usize,
) -> tern_core::store::Result<ScanPage> {
    store
        .scan(
            kind,
            ScanRequest {
                filter: filter.clone(),
                cursor,
                limit,
            },
        )
        .await
}

/// What [`scan_pages`] read.
#[derive(Debug, Clone)]
pub struct Pages {
    /// Every entity returned, in the order read (a key returned twice is here twice).
    pub entities: Vec<Entity>,
    /// The cursor of every page but the last.
    pub cursors: Vec<Cursor>,
}

impl Pages {
    /// How many pages the scan took.
    pub fn count(&self) -> usize {
        self.cursors.len() + 1
    }

    /// The ids of the entities read; panics when one was returned twice.
    pub fn ids_once(&self) -> BTreeSet<Value> {
        let mut ids = BTreeSet::new();
        for e in &self.entities {
            assert!(ids.insert(e.key.id.clone()), "{} returned twice", e.key);
        }
        ids
    }
}

/// Writes `count` numbered entities of `kind` in one batch: entity `i` has id `id(i)`, the
/// property `n = i`, and version 1 when `i` is a multiple of 3 (else 0), so that
/// `count(kind, Filter::at_version(1))` of 100 is 34. Panics when a write is refused.
pub async fn put_numbered<V: Into<Value>>(
    store: &dyn Store,
    kind: &str,
    count: i64,
    id: impl Fn(i64) -> V,
) {
    let writes = (0..count)
        .map(|i| {
            let props = [("n".to_owned(), Value::Int(i))].into_iter().collect();
            let mut e = Entity::new(Key::new(kind, id(i)).unwrap(), props);
            e.version = u64::from(i % 3 == 0);
            tern_core::store::Write::Put(e)
        })
        .collect();
    store.write_batch(writes).await.unwrap();
}

/// Scans `kind` with `filter` from the start in pages of at most `limit`, each page through
/// the store that `open` gives (the same store each time, or a new session per page: a
/// cursor is plain text that outlives the process). Panics when a page holds more than
/// `limit` entities, or when the scan has not ended after `max_pages` pages.
pub async fn scan_pages<F, Fut>(
    open: F,
    kind: &str,
    filter: &Filter,
    limit: usize,
    max_pages: usize,
) -> Pages
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    scan_pages_from(open, kind, filter, limit, max_pages, None).await
}

/// [`scan_pages`] resumed from `cursor` (`None`: from the start).
pub async fn scan_pages_from<F, Fut>(
    mut open: F,
    kind: &str,
    filter: &Filter,
    limit: usize,
    max_pages: usize,
    mut cursor: Option<Cursor>,
) -> Pages
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let mut pages = Pages {
        entities: Vec::new(),
        cursors: Vec::new(),
    };
    loop {
        let page = page_of(open().await.as_ref(), kind, filter, cursor, limit)
            .await
            .unwrap();
        assert!(
            page.entities.len() <= limit,
            "a page of {kind} holds {} entities, more than the limit {limit}",
            page.entities.len()
        );
        pages.entities.extend(page.entities);
        match page.cursor {
            Some(c) => {
                pages.cursors.push(c.clone());
                cursor = Some(c);
            }
            None => return pages,
        }
        assert!(
            pages.count() <= max_pages,
            "the scan of {kind} did not end after {max_pages} pages"
        );
    }
}

/// One whole [`Store::rename_kind`] pass from `from` to `to` in batches of `limit`,
/// from the start: the sum of its pages (entities renamed, every collision reported).
///
/// # Errors
/// The first error of a batch.
pub async fn rename_pass(
    store: &dyn Store,
    from: &str,
    to: &str,
    limit: usize,
) -> tern_core::store::Result<tern_core::store::RenameKindPage> {
    let mut total = tern_core::store::RenameKindPage::default();
    let mut cursor = None;
    loop {
        let page = store
            .rename_kind(tern_core::store::RenameKindRequest {
                from: from.to_owned(),
                to: to.to_owned(),
                cursor,
                limit,
            })
            .await?;
        total.renamed += page.renamed;
        total.collisions.extend(page.collisions);
        match page.cursor {
            Some(c) => cursor = Some(c),
            None => return Ok(total),
        }
    }
}
