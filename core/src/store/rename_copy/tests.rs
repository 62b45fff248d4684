//! The protocol over a table in memory whose rows are `(id, n)`, with a writer
//! that can act between the copy and the delete and a crash at any step.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;

/// A table per kind: id -> n.
type Tables = BTreeMap<String, BTreeMap<i64, i64>>;

/// What the test store does at a step: run a writer, or fail (a crash).
type Step = Box<dyn FnMut(&mut Tables) -> bool + Send>;

#[derive(Default)]
struct Rows {
    tables: Mutex<Tables>,
    /// Run before each delete of sources; `true` fails the call.
    before_delete: Mutex<Option<Step>>,
    /// Run before each undo; `true` fails the call.
    before_undo: Mutex<Option<Step>>,
    /// Fails the copy after this many rows were copied.
    copy_fails_after: Mutex<Option<usize>>,
}

fn crash() -> Error {
    Error::new(ErrorKind::Unavailable, "crash")
}

impl Rows {
    fn with(kind: &str, rows: &[(i64, i64)]) -> Rows {
        let s = Rows::default();
        s.put(kind, rows);
        s
    }

    fn put(&self, kind: &str, rows: &[(i64, i64)]) {
        let mut t = self.tables.lock().unwrap();
        t.entry(kind.to_owned())
            .or_default()
            .extend(rows.iter().copied());
    }

    fn table(&self, kind: &str) -> Vec<(i64, i64)> {
        let t = self.tables.lock().unwrap();
        t.get(kind)
            .map(|m| m.iter().map(|(a, b)| (*a, *b)).collect())
            .unwrap_or_default()
    }

    fn run(step: &Mutex<Option<Step>>, tables: &mut Tables) -> Result<()> {
        let failed = step.lock().unwrap().as_mut().is_some_and(|f| f(tables));
        if failed { Err(crash()) } else { Ok(()) }
    }
}

#[async_trait]
impl CopyRename for Rows {
    type Row = (i64, i64);
    type Plan = (String, String);

    fn scheme(&self) -> &'static str {
        "test"
    }

    fn location(&self) -> String {
        "memory".to_owned()
    }

    async fn plan(&self, from: &str, to: &str) -> Result<Option<Self::Plan>> {
        if to.is_empty() {
            return Err(Error::new(ErrorKind::ConfigInvalid, "empty kind"));
        }
        let exists = self.tables.lock().unwrap().contains_key(from);
        Ok(exists.then(|| (from.to_owned(), to.to_owned())))
    }

    async fn read_page(
        &self,
        plan: &Self::Plan,
        cursor: Option<&Cursor>,
        limit: usize,
    ) -> Result<(Vec<Self::Row>, Option<Cursor>)> {
        let after: Option<i64> = cursor.map(|c| c.0.parse().unwrap());
        let t = self.tables.lock().unwrap();
        let rows: Vec<(i64, i64)> = t[&plan.0]
            .iter()
            .filter(|(id, _)| after.is_none_or(|a| **id > a))
            .take(limit)
            .map(|(a, b)| (*a, *b))
            .collect();
        let next = (rows.len() == limit).then(|| Cursor(rows[limit - 1].0.to_string()));
        Ok((rows, next))
    }

    async fn copy(&self, plan: &Self::Plan, rows: &[&Self::Row]) -> Result<Vec<Copied>> {
        let fails_after = *self.copy_fails_after.lock().unwrap();
        let mut t = self.tables.lock().unwrap();
        let to = t.entry(plan.1.clone()).or_default();
        let mut out = Vec::new();
        for (i, (id, n)) in rows.iter().enumerate() {
            if fails_after == Some(i) {
                return Err(crash());
            }
            out.push(match to.get(id) {
                None => {
                    to.insert(*id, *n);
                    Copied::Yes
                }
                Some(there) if there == n => Copied::Yes,
                Some(_) => Copied::Collision,
            });
        }
        Ok(out)
    }

    async fn delete_if_same(
        &self,
        plan: &Self::Plan,
        side: Side,
        rows: &[&Self::Row],
    ) -> Result<Vec<bool>> {
        let mut t = self.tables.lock().unwrap();
        let (kind, step) = match side {
            Side::Old => (&plan.0, &self.before_delete),
            Side::New => (&plan.1, &self.before_undo),
        };
        Rows::run(step, &mut t)?;
        let table = t.entry(kind.clone()).or_default();
        Ok(rows
            .iter()
            .map(|(id, n)| {
                let same = table.get(id) == Some(n);
                if same {
                    table.remove(id);
                }
                same
            })
            .collect())
    }

    async fn reread(&self, plan: &Self::Plan, rows: &[&Self::Row]) -> Result<Vec<Self::Row>> {
        let t = self.tables.lock().unwrap();
        Ok(rows
            .iter()
            .filter_map(|(id, _)| t[&plan.0].get(id).map(|n| (*id, *n)))
            .collect())
    }

    fn key_of(&self, plan: &Self::Plan, row: &Self::Row) -> Result<Key> {
        Ok(Key::new(plan.0.as_str(), row.0).unwrap())
    }
}

fn request(limit: usize, cursor: Option<Cursor>) -> RenameKindRequest {
    RenameKindRequest {
        from: "old".into(),
        to: "new".into(),
        cursor,
        limit,
    }
}

/// Runs a whole pass, page by page.
async fn pass(store: &Rows, limit: usize) -> Result<RenameKindPage> {
    let mut total = RenameKindPage::default();
    let mut cursor = None;
    loop {
        let page = rename_by_copy(store, request(limit, cursor)).await?;
        total.renamed += page.renamed;
        total.collisions.extend(page.collisions);
        cursor = page.cursor;
        if cursor.is_none() {
            return Ok(total);
        }
    }
}

fn old_key(id: i64) -> Key {
    Key::new("old", id).unwrap()
}

#[tokio::test]
async fn every_row_moves_and_a_collision_is_reported_and_left_alone() {
    let store = Rows::with("old", &[(1, 10), (2, 20), (3, 30), (4, 40), (5, 50)]);
    store.put("new", &[(4, 400)]);
    let page = pass(&store, 2).await.unwrap();
    assert_eq!(page.renamed, 4);
    assert_eq!(page.collisions, vec![old_key(4)]);
    assert_eq!(store.table("old"), vec![(4, 40)]);
    assert_eq!(
        store.table("new"),
        vec![(1, 10), (2, 20), (3, 30), (4, 400), (5, 50)]
    );
    // A second pass reports the collision again and moves nothing.
    let again = pass(&store, 10).await.unwrap();
    assert_eq!((again.renamed, again.collisions), (0, vec![old_key(4)]));
}

#[tokio::test]
async fn limit_zero_and_a_kind_without_rows_write_nothing() {
    let store = Rows::with("old", &[(1, 10)]);
    let checked = rename_by_copy(&store, request(0, None)).await.unwrap();
    assert_eq!(checked, RenameKindPage::default());
    assert_eq!(store.table("new"), vec![]);
    assert_eq!(store.table("old"), vec![(1, 10)]);
    let mut bad = request(0, None);
    bad.to = String::new();
    let err = rename_by_copy(&store, bad).await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::ConfigInvalid,
        "checked even at limit 0"
    );
    let mut missing = request(10, None);
    missing.from = "nothing".into();
    assert_eq!(
        rename_by_copy(&store, missing).await.unwrap(),
        RenameKindPage::default()
    );
    let mut same = request(10, None);
    same.to = "old".into();
    assert_eq!(
        rename_by_copy(&store, same).await.unwrap(),
        RenameKindPage::default()
    );
    assert_eq!(store.table("old"), vec![(1, 10)]);
}

/// A copy identical to the source (a move interrupted after its copy) is the
/// move's own: no collision.
#[tokio::test]
async fn a_move_interrupted_after_its_copy_completes() {
    let store = Rows::with("old", &[(1, 10), (2, 20), (3, 30)]);
    store.put("new", &[(2, 20)]);
    let page = pass(&store, 2).await.unwrap();
    assert_eq!((page.renamed, page.collisions.len()), (3, 0));
    assert_eq!(store.table("old"), vec![]);
    assert_eq!(store.table("new"), vec![(1, 10), (2, 20), (3, 30)]);
}

/// A source updated or deleted between the copy and the delete: the stale copy
/// is taken back, the update moved, the deleted entity not resurrected.
#[tokio::test]
async fn an_update_or_delete_between_copy_and_delete_is_kept() {
    let store = Rows::with("old", &[(1, 10), (2, 20), (3, 30)]);
    let mut once = true;
    *store.before_delete.lock().unwrap() = Some(Box::new(move |t: &mut Tables| {
        if std::mem::take(&mut once) {
            let old = t.get_mut("old").unwrap();
            old.insert(2, 222);
            old.remove(&3);
        }
        false
    }));
    let page = pass(&store, 10).await.unwrap();
    assert_eq!((page.renamed, page.collisions.len()), (2, 0));
    assert_eq!(store.table("old"), vec![]);
    assert_eq!(store.table("new"), vec![(1, 10), (2, 222)]);
}

/// A writer of the new kind that changes a copy before the undo: the copy
/// stays, and is met again as a collision (nothing overwritten, nothing lost).
#[tokio::test]
async fn a_copy_changed_by_a_writer_of_the_new_kind_stays_as_a_collision() {
    let store = Rows::with("old", &[(1, 10)]);
    *store.before_delete.lock().unwrap() = Some(Box::new(|t: &mut Tables| {
        t.get_mut("old").unwrap().insert(1, 11);
        false
    }));
    *store.before_undo.lock().unwrap() = Some(Box::new(|t: &mut Tables| {
        t.get_mut("new").unwrap().insert(1, 99);
        false
    }));
    let page = pass(&store, 10).await.unwrap();
    assert_eq!((page.renamed, page.collisions), (0, vec![old_key(1)]));
    assert_eq!(store.table("old"), vec![(1, 11)]);
    assert_eq!(store.table("new"), vec![(1, 99)]);
}

/// A writer that changes a row at every attempt: `Busy` (temporary) after
/// [`ATTEMPTS`] attempts, the last update under the old kind, no copy left;
/// once it stops, the move completes.
#[tokio::test]
async fn a_row_changing_at_every_attempt_is_busy_and_loses_nothing() {
    let store = Rows::with("old", &[(1, 10), (2, 20)]);
    let mut n = 0;
    *store.before_delete.lock().unwrap() = Some(Box::new(move |t: &mut Tables| {
        n += 1;
        t.get_mut("old").unwrap().insert(2, 1000 + n);
        false
    }));
    let err = pass(&store, 10).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    assert!(err.is_temporary());
    assert!(err.to_string().contains("nothing was lost"), "{err}");
    assert!(
        err.context().contains(&("key", "old:2".to_owned())),
        "{:?}",
        err.context()
    );
    let attempts = i64::try_from(ATTEMPTS).unwrap();
    assert_eq!(store.table("old"), vec![(2, 1000 + attempts)]);
    assert_eq!(store.table("new"), vec![(1, 10)], "no copy left behind");
    *store.before_delete.lock().unwrap() = None;
    let page = pass(&store, 10).await.unwrap();
    assert_eq!(page.renamed, 1);
    assert_eq!(store.table("new"), vec![(1, 10), (2, 1000 + attempts)]);
}

/// A crash at every step of the protocol (in the middle of the copy, before the
/// delete of the sources): each entity is under exactly one name or under both
/// with the same row, and a second run completes every move, without a
/// collision and with every value kept.
#[tokio::test]
async fn a_crash_at_any_step_is_completed_by_running_again() {
    let rows = [(1, 10), (2, 20), (3, 30), (4, 40)];
    for step in 0..5 {
        let store = Rows::with("old", &rows);
        if step < 4 {
            *store.copy_fails_after.lock().unwrap() = Some(step);
        } else {
            *store.before_delete.lock().unwrap() = Some(Box::new(|_: &mut Tables| true));
        }
        let err = pass(&store, 10).await.unwrap_err();
        assert_eq!(err.message(), "crash", "step {step}");
        let (old, new) = (store.table("old"), store.table("new"));
        for (id, _) in rows {
            let a = old.iter().find(|r| r.0 == id);
            let b = new.iter().find(|r| r.0 == id);
            assert!(a.is_some() || b.is_some(), "step {step}: id {id} lost");
            if let (Some(a), Some(b)) = (a, b) {
                assert_eq!(a, b, "step {step}: two different rows of id {id}");
            }
        }
        *store.copy_fails_after.lock().unwrap() = None;
        *store.before_delete.lock().unwrap() = None;
        let page = pass(&store, 10).await.unwrap();
        assert!(page.collisions.is_empty(), "step {step}: {page:?}");
        assert_eq!(store.table("old"), vec![], "step {step}");
        assert_eq!(store.table("new"), rows.to_vec(), "step {step}");
    }
}

/// The one window the protocol cannot close without a log: a crash after a
/// writer changed a copied source and before the undo leaves the stale copy
/// under the new kind. Nothing is lost (the update stays under the old kind),
/// and the next run reports the id as a collision rather than overwrite the copy.
#[tokio::test]
async fn a_crash_before_an_undo_leaves_a_collision_and_loses_nothing() {
    let store = Rows::with("old", &[(1, 10), (3, 30)]);
    *store.before_delete.lock().unwrap() = Some(Box::new(|t: &mut Tables| {
        t.get_mut("old").unwrap().insert(3, 33);
        false
    }));
    *store.before_undo.lock().unwrap() = Some(Box::new(|_: &mut Tables| true));
    let err = pass(&store, 10).await.unwrap_err();
    assert_eq!(err.message(), "crash");
    *store.before_delete.lock().unwrap() = None;
    *store.before_undo.lock().unwrap() = None;
    let page = pass(&store, 10).await.unwrap();
    assert_eq!((page.renamed, page.collisions), (0, vec![old_key(3)]));
    assert_eq!(store.table("old"), vec![(3, 33)], "the update kept");
    assert_eq!(store.table("new"), vec![(1, 10), (3, 30)]);
}
