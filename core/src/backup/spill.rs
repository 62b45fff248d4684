//! An external merge sort of export lines by key, in bounded memory.
//!
//! Lines are pushed with their key in any order, possibly more than once (an
//! unordered scan may return an entity twice). Up to a memory budget they are
//! kept in memory; past it they are sorted and written to a temporary file (a
//! *run*). At the end the runs are merged, smallest key first, each key once
//! (the first pushed wins, as a stable sort and de-duplication in memory would
//! give). At most [`FAN_IN`] runs are open at a time: when that many exist
//! they are merged into one first. Memory is the budget plus one line per run
//! and their read buffers, whatever the number of lines.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use crate::model::Key;
use crate::model::keycode::encode_key;

/// The most runs merged at once (open files, and a read buffer each).
pub const FAN_IN: usize = 64;

/// The bytes of memory a line costs besides its text and key (vector slot,
/// string and key headers): counted so a kind of tiny entities stays in budget.
const LINE_OVERHEAD: usize = 64;

/// Lines sorted by key through temporary files. See the module docs.
#[derive(Debug)]
pub struct Spill {
    budget: usize,
    dir: Option<PathBuf>,
    lines: Vec<(Vec<u8>, String)>,
    bytes: usize,
    runs: Vec<File>,
    spilled: u64,
}

impl Spill {
    /// A sort that keeps at most about `budget` bytes of lines in memory, with
    /// its temporary files in `dir` (`None`: the system's temporary folder,
    /// `TMPDIR`). The files have no name and are gone when the sort is.
    pub fn new(budget: usize, dir: Option<PathBuf>) -> Spill {
        Spill {
            budget: budget.max(1),
            dir,
            lines: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
            spilled: 0,
        }
    }

    /// Adds `line` under `key`.
    ///
    /// # Errors
    /// A temporary file that cannot be written.
    pub fn push(&mut self, key: &Key, line: String) -> std::io::Result<()> {
        let code = encode_key(key);
        self.bytes += code.len() + line.len() + LINE_OVERHEAD;
        self.lines.push((code, line));
        if self.bytes >= self.budget {
            self.spill()?;
        }
        Ok(())
    }

    /// How many lines went to temporary files so far (0: the sort fit in memory).
    pub fn spilled(&self) -> u64 {
        self.spilled
    }

    /// Writes every line once, sorted by key, each followed by a newline; the
    /// number of lines written.
    ///
    /// # Errors
    /// A temporary file that cannot be read, or `out` that cannot be written.
    pub fn finish(mut self, out: &mut dyn Write) -> std::io::Result<u64> {
        if self.runs.is_empty() {
            let lines = sorted_unique(std::mem::take(&mut self.lines));
            for (_, line) in &lines {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
            return Ok(lines.len() as u64);
        }
        self.spill()?;
        let runs = std::mem::take(&mut self.runs);
        merge(runs, &mut LineSink::Out(out))
    }

    /// Sorts the lines in memory into a new run (merging the runs into one
    /// first when there are [`FAN_IN`]).
    fn spill(&mut self) -> std::io::Result<()> {
        if self.lines.is_empty() {
            return Ok(());
        }
        if self.runs.len() + 1 >= FAN_IN {
            let runs = std::mem::take(&mut self.runs);
            let mut file = self.tempfile()?;
            {
                let mut w = BufWriter::new(&mut file);
                merge(runs, &mut LineSink::Run(&mut w))?;
                w.flush()?;
            }
            file.seek(SeekFrom::Start(0))?;
            self.runs.push(file);
        }
        let lines = sorted_unique(std::mem::take(&mut self.lines));
        self.spilled += lines.len() as u64;
        self.bytes = 0;
        let mut file = self.tempfile()?;
        {
            let mut w = BufWriter::new(&mut file);
            for (code, line) in &lines {
                write_record(&mut w, code, line.as_bytes())?;
            }
            w.flush()?;
        }
        file.seek(SeekFrom::Start(0))?;
        self.runs.push(file);
        Ok(())
    }

    fn tempfile(&self) -> std::io::Result<File> {
        match &self.dir {
            Some(dir) => tempfile::tempfile_in(dir),
            None => tempfile::tempfile(),
        }
    }
}

/// Sorted by key (stably: the first pushed of equal keys first) and each key once.
fn sorted_unique(mut lines: Vec<(Vec<u8>, String)>) -> Vec<(Vec<u8>, String)> {
    lines.sort_by(|a, b| a.0.cmp(&b.0));
    lines.dedup_by(|later, first| later.0 == first.0);
    lines
}

/// Where merged lines go: the export (text lines) or a run (records).
enum LineSink<'a> {
    Out(&'a mut dyn Write),
    Run(&'a mut dyn Write),
}

/// A run record: key length, key, line length, line (lengths as u32, big-endian).
fn write_record(w: &mut dyn Write, code: &[u8], line: &[u8]) -> std::io::Result<()> {
    let len = |n: usize| {
        u32::try_from(n).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an export line of 4 GiB or more cannot be sorted",
            )
        })
    };
    w.write_all(&len(code.len())?.to_be_bytes())?;
    w.write_all(code)?;
    w.write_all(&len(line.len())?.to_be_bytes())?;
    w.write_all(line)
}

/// The next record of a run, `None` at its end.
fn read_record(r: &mut dyn Read) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut code = vec![0u8; u32::from_be_bytes(len) as usize];
    r.read_exact(&mut code)?;
    r.read_exact(&mut len)?;
    let mut line = vec![0u8; u32::from_be_bytes(len) as usize];
    r.read_exact(&mut line)?;
    Ok(Some((code, line)))
}

/// Merges sorted runs into `sink`, each key once (on equal keys the earlier
/// run's line wins: runs are in the order their lines were pushed).
fn merge(runs: Vec<File>, sink: &mut LineSink<'_>) -> std::io::Result<u64> {
    let mut readers: Vec<BufReader<File>> = runs
        .into_iter()
        .map(|f| BufReader::with_capacity(64 * 1024, f))
        .collect();
    let mut heads: Vec<Option<Vec<u8>>> = vec![None; readers.len()];
    let mut heap = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some((code, line)) = read_record(r)? {
            heads[i] = Some(line);
            heap.push(Reverse((code, i)));
        }
    }
    let mut last: Option<Vec<u8>> = None;
    let mut written = 0u64;
    while let Some(Reverse((code, i))) = heap.pop() {
        let line = heads[i].take().unwrap_or_default();
        if last.as_deref() != Some(code.as_slice()) {
            match sink {
                LineSink::Out(out) => {
                    out.write_all(&line)?;
                    out.write_all(b"\n")?;
                }
                LineSink::Run(w) => write_record(*w, &code, &line)?,
            }
            written += 1;
            last = Some(code);
        }
        if let Some((next, line)) = read_record(&mut readers[i])? {
            heads[i] = Some(line);
            heap.push(Reverse((next, i)));
        }
    }
    Ok(written)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Value;

    fn key(id: i64) -> Key {
        Key::new("k", Value::Int(id)).unwrap()
    }

    /// The lines of `ids` (in push order, line text naming the push index),
    /// sorted with `budget` bytes.
    fn sort(ids: &[i64], budget: usize) -> (Vec<String>, u64) {
        let mut s = Spill::new(budget, None);
        for (n, id) in ids.iter().enumerate() {
            s.push(&key(*id), format!("{id}#{n}")).unwrap();
        }
        let spilled = s.spilled();
        let mut out = Vec::new();
        s.finish(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        (text.lines().map(str::to_owned).collect(), spilled)
    }

    #[test]
    fn a_sort_through_many_runs_equals_the_sort_in_memory() {
        // Shuffled ids (negative ones too: the key order, not the text), each
        // pushed twice at different moments: the first push wins.
        let mut ids: Vec<i64> = (0..5000).map(|i| (i * 7919) % 5000 - 2500).collect();
        let again: Vec<i64> = ids.iter().rev().step_by(3).copied().collect();
        ids.extend(again);
        let (in_memory, none) = sort(&ids, usize::MAX);
        assert_eq!(none, 0);
        // ~1 KB runs: hundreds of runs, so several rounds of FAN_IN merges.
        let (external, spilled) = sort(&ids, 1024);
        assert!(spilled > 5000, "the small budget spilled ({spilled} lines)");
        assert_eq!(external, in_memory);
        assert_eq!(external.len(), 5000);
        let got: Vec<i64> = external
            .iter()
            .map(|l| l.split('#').next().unwrap().parse().unwrap())
            .collect();
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        // The first push of a repeated id is kept.
        let first = format!("{}#0", ids[0]);
        assert!(external.contains(&first));
    }
}
