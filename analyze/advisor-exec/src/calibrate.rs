//! `--calibrate`: gets of n partitions × w rows, write batches and a client-side sort measured
//! on a store, and the cost model fitted to them.

use std::time::Instant;

use tern_advisor::cost::{CostModel, Sample};
use tern_core::model::{Entity, Key, Map, Value};
use tern_core::store::{Store, Write};

use crate::error::{ExecError, Result};

/// The scratch kind the calibration writes (and deletes).
pub const CALIBRATION_KIND: &str = "tern_advise_calibration";
/// Rows per partition measured.
const WIDTHS: [usize; 3] = [1, 10, 100];
/// Gets per measurement.
const GETS: [usize; 4] = [1, 5, 20, 50];
/// Partitions written per width (gets cycle through them).
const PARTITIONS: usize = 50;
/// Repetitions of each measurement; the median is kept.
const REPEATS: usize = 7;

fn partition_key(w: usize, p: usize) -> Result<Key> {
    Ok(Key::new(CALIBRATION_KIND, format!("w{w}-p{p}"))?)
}

/// Writes partitions of 1, 10 and 100 rows (one entity each, its rows an array of 40-byte maps),
/// times sequential gets of n of them, and returns the samples (median of the repetitions) after
/// deleting the partitions again.
///
/// # Errors
/// The store fails, or a partition does not read back with its rows.
pub async fn measure(store: &dyn Store) -> Result<Measured> {
    let measured = measure_inner(store).await;
    // Remove every partition the measurement may have written, whatever happened.
    let mut deletes = Vec::new();
    for w in WIDTHS {
        for p in 0..PARTITIONS {
            deletes.push(Write::Delete(partition_key(w, p)?));
        }
    }
    for rep in 0..REPEATS {
        for i in 0..50 {
            deletes.push(Write::Delete(partition_key(0, rep * 100 + i)?));
        }
    }
    let removed = store.write_batch(deletes).await;
    match (measured, removed) {
        (Ok(m), Ok(_)) => Ok(m),
        (Err(e), Ok(_)) => Err(e),
        (m, Err(source)) => Err(ExecError::Cleanup {
            kind: CALIBRATION_KIND.to_owned(),
            after: match m {
                Ok(_) => String::new(),
                Err(first) => format!(" after the calibration failed ({first})"),
            },
            source,
        }),
    }
}

async fn measure_inner(store: &dyn Store) -> Result<Measured> {
    for w in WIDTHS {
        let mut writes = Vec::with_capacity(PARTITIONS);
        for p in 0..PARTITIONS {
            let rows: Vec<Value> = (0..w)
                .map(|r| {
                    Value::Map(Map::from([
                        ("c".to_owned(), Value::Int(r as i64)),
                        ("v".to_owned(), Value::String("x".repeat(32))),
                    ]))
                })
                .collect();
            writes.push(Write::Put(Entity::new(
                partition_key(w, p)?,
                Map::from([("rows".to_owned(), Value::Array(rows))]),
            )));
        }
        store.write_batch(writes).await?;
    }
    let mut samples = Vec::new();
    for w in WIDTHS {
        for n in GETS {
            let mut times = Vec::with_capacity(REPEATS);
            for rep in 0..REPEATS {
                let start = Instant::now();
                for i in 0..n {
                    let key = partition_key(w, (i + rep * n) % PARTITIONS)?;
                    let rows = match store
                        .get(&key)
                        .await?
                        .and_then(|e| e.value.get("rows").cloned())
                    {
                        Some(Value::Array(rows)) => rows.len(),
                        _ => 0,
                    };
                    if rows != w {
                        return Err(ExecError::Readback {
                            id: format!("{:?}", key.id),
                            got: rows,
                            want: w,
                        });
                    }
                }
                times.push(start.elapsed().as_secs_f64() * 1000.0);
            }
            times.sort_by(f64::total_cmp);
            samples.push(Sample {
                gets: n as f64,
                width: w as f64,
                ms: times[REPEATS / 2],
            });
        }
    }
    // Writes: batches of k one-row puts, then the same k deletes.
    let (mut puts, mut dels) = (Vec::new(), Vec::new());
    for k in [1usize, 10, 50] {
        let (mut tp, mut td) = (Vec::new(), Vec::new());
        for rep in 0..REPEATS {
            let keys: Vec<Key> = (0..k)
                .map(|i| partition_key(0, rep * 100 + i))
                .collect::<Result<_>>()?;
            let writes = keys
                .iter()
                .map(|key| {
                    Write::Put(Entity::new(
                        key.clone(),
                        Map::from([("v".to_owned(), Value::String("x".repeat(32)))]),
                    ))
                })
                .collect();
            let start = Instant::now();
            store.write_batch(writes).await?;
            tp.push(start.elapsed().as_secs_f64() * 1000.0);
            let start = Instant::now();
            store
                .write_batch(keys.into_iter().map(Write::Delete).collect())
                .await?;
            td.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        tp.sort_by(f64::total_cmp);
        td.sort_by(f64::total_cmp);
        puts.push((k as f64, tp[REPEATS / 2]));
        dels.push((k as f64, td[REPEATS / 2]));
    }
    Ok(Measured {
        gets: samples,
        puts,
        deletes: dels,
        sort: measure_sort(),
    })
}

/// Rows a measured client-side sort orders (a wide partition's worth).
const SORT_ROWS: usize = 100;

/// The sort penalty: the median time to order [`SORT_ROWS`] rows (maps as a get returns them) by
/// an integer column, in the reverse of their order, in ms.
fn measure_sort() -> f64 {
    let rows: Vec<Value> = (0..SORT_ROWS)
        .map(|r| {
            Value::Map(Map::from([
                ("c".to_owned(), Value::Int(r as i64)),
                ("v".to_owned(), Value::String("x".repeat(32))),
            ]))
        })
        .collect();
    let key = |v: &Value| match v {
        Value::Map(m) => match m.get("c") {
            Some(Value::Int(i)) => -*i,
            _ => 0,
        },
        _ => 0,
    };
    let mut times = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        let mut copy = rows.clone();
        let start = Instant::now();
        copy.sort_by_key(key);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        std::hint::black_box(&copy);
    }
    times.sort_by(f64::total_cmp);
    times[REPEATS / 2]
}

/// What [`measure`] found.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Gets of n partitions × w rows.
    pub gets: Vec<Sample>,
    /// (rows, ms) of batches of one-row puts.
    pub puts: Vec<(f64, f64)>,
    /// (rows, ms) of batches of deletes.
    pub deletes: Vec<(f64, f64)>,
    /// The client-side sort of a wide partition's rows (ms).
    pub sort: f64,
}

/// Measures on `store` and fits the cost model: the lookup constants by least squares over the
/// gets, insert and delete as the slopes of the write batches, the sort penalty as the time of a
/// client-side sort of a wide partition's rows. Constants the samples do not determine keep
/// `base`'s.
///
/// # Errors
/// The store fails, or the samples determine no fit.
pub async fn calibrate(store: &dyn Store, base: &CostModel) -> Result<(CostModel, Measured)> {
    let measured = measure(store).await?;
    let mut fitted = base.fit(&measured.gets).ok_or(ExecError::NoFit)?;
    fitted.insert = tern_advisor::cost::slope(&measured.puts).unwrap_or(base.insert);
    fitted.delete = tern_advisor::cost::slope(&measured.deletes).unwrap_or(base.delete);
    fitted.sort = measured.sort;
    Ok((fitted, measured))
}
