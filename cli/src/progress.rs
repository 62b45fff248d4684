//! Progress output: a bar with rate and ETA on a terminal, structured log lines elsewhere.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tern_core::migrate::{Progress, RunCounts, StageStart};

/// The bar drawn on stderr now, if any: log lines step around it ([`suspend_bar`]).
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn show(bar: Option<&ProgressBar>) {
    *SHOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = bar.cloned();
}

/// Runs `f` (which writes to stderr) with the progress bar cleared, then draws
/// the bar again below what `f` wrote; without a bar, just runs `f`.
pub fn suspend_bar<R>(f: impl FnOnce() -> R) -> R {
    let shown = SHOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match shown {
        Some(bar) if !bar.is_finished() => bar.suspend(f),
        _ => f(),
    }
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A progress bar on stderr.
    Bar,
    /// One line per checkpoint on stderr.
    Lines,
    /// Nothing.
    Quiet,
}

impl Mode {
    /// The bar on a terminal, lines otherwise, nothing when quiet.
    pub fn detect(quiet: bool) -> Mode {
        if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Bar
        } else {
            Mode::Lines
        }
    }
}

/// The CLI's progress receiver.
#[derive(Debug)]
pub struct CliProgress {
    mode: Mode,
    bar: Mutex<Option<ProgressBar>>,
    /// The bar of a pass that reads without writing (a move/copy's index, its safety check).
    pass: Mutex<Option<ProgressBar>>,
    stage: Mutex<String>,
}

/// A bar with rate and ETA when `total` is known, else a counter with the rate.
fn new_bar(label: String, total: Option<u64>, unit: &str) -> ProgressBar {
    let (bar, template) = match total {
        Some(t) => (
            ProgressBar::new(t),
            format!(
                "{{msg}}\n  [{{bar:40}}] {{human_pos}}/{{human_len}} {unit}  {{rate}}  ETA {{eta}}"
            ),
        ),
        None => (
            ProgressBar::no_length(),
            format!("{{msg}}\n  {{spinner}} {{human_pos}} {unit}  {{rate}}  {{elapsed}}"),
        ),
    };
    bar.set_draw_target(ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(&template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}/s", state.per_sec());
            },
        )
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(label);
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

impl CliProgress {
    /// A receiver in `mode`.
    pub fn new(mode: Mode) -> CliProgress {
        CliProgress {
            mode,
            bar: Mutex::new(None),
            pass: Mutex::new(None),
            stage: Mutex::new(String::new()),
        }
    }

    fn bar(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.bar
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn pass(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.pass
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Progress for CliProgress {
    fn stage_started(&self, start: &StageStart<'_>) {
        let StageStart {
            migration,
            name,
            stage,
            stages,
            description,
            total,
        } = *start;
        let label = format!(
            "{migration:04}_{name} [{}/{}] {description}",
            stage + 1,
            stages
        );
        if let Ok(mut s) = self.stage.lock() {
            s.clone_from(&label);
        }
        match self.mode {
            Mode::Bar => {
                // The total is the store's estimate (an upper bound at the
                // start of a stage); a store without one gets a counter.
                let bar = new_bar(label, total, "entities");
                show(Some(&bar));
                *self.bar() = Some(bar);
            }
            Mode::Lines => {
                crate::errln!(
                    "{}",
                    serde_json::json!({"event": "stage", "migration": migration, "name": name, "stage": stage + 1,
                        "stages": stages, "description": description, "total": total})
                );
            }
            Mode::Quiet => {}
        }
    }

    fn checkpoint(&self, done: u64, counts: &RunCounts) {
        match self.mode {
            Mode::Bar => {
                if let Some(bar) = self.bar().as_ref() {
                    // Entities written during the run can outgrow the estimate.
                    if bar.length().is_some_and(|len| done > len) {
                        bar.set_length(done);
                    }
                    bar.set_position(done);
                }
            }
            Mode::Lines => {
                let stage = self.stage.lock().map(|s| s.clone()).unwrap_or_default();
                crate::errln!(
                    "{}",
                    serde_json::json!({"event": "checkpoint", "stage": stage, "done": done,
                        "processed": counts.processed, "changed": counts.changed,
                        "conflicts": counts.conflicts, "skipped": counts.skipped})
                );
            }
            Mode::Quiet => {}
        }
    }

    fn stage_finished(&self, _counts: &RunCounts) {
        if let Some(bar) = self.bar().take() {
            show(None);
            bar.finish();
        }
    }

    fn pass_started(&self, description: &str, total: Option<u64>) {
        match self.mode {
            Mode::Bar => {
                // The stage's bar steps aside while the pass reads.
                if let Some(bar) = self.bar().as_ref() {
                    bar.set_draw_target(ProgressDrawTarget::hidden());
                }
                let stage = self.stage.lock().map(|s| s.clone()).unwrap_or_default();
                let label = if stage.is_empty() {
                    description.to_owned()
                } else {
                    format!("{stage}: {description}")
                };
                let bar = new_bar(label, total, "read");
                show(Some(&bar));
                *self.pass() = Some(bar);
            }
            Mode::Lines => crate::errln!(
                "{}",
                serde_json::json!({"event": "pass", "description": description, "total": total})
            ),
            Mode::Quiet => {}
        }
    }

    fn pass_progress(&self, done: u64) {
        if let Some(bar) = self.pass().as_ref() {
            if bar.length().is_some_and(|len| done > len) {
                bar.set_length(done);
            }
            bar.set_position(done);
        }
    }

    fn pass_finished(&self, done: u64) {
        match self.mode {
            Mode::Bar => {
                if let Some(bar) = self.pass().take() {
                    bar.finish_and_clear();
                }
                show(None);
                if let Some(bar) = self.bar().as_ref() {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                    show(Some(bar));
                }
            }
            Mode::Lines => crate::errln!(
                "{}",
                serde_json::json!({"event": "pass_finished", "read": done})
            ),
            Mode::Quiet => {}
        }
    }

    fn note(&self, text: &str) {
        match self.mode {
            Mode::Bar => match self.bar().as_ref() {
                Some(bar) => bar.println(text),
                None => crate::errln!("{text}"),
            },
            Mode::Lines => crate::errln!("{}", serde_json::json!({"event": "note", "text": text})),
            Mode::Quiet => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::TermLike;

    use super::*;

    /// A terminal that records what is drawn on it, one entry per operation.
    #[derive(Debug, Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Recorder {
        fn push(&self, op: String) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).push(op);
        }
        fn ops(&self) -> Vec<String> {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
        }
    }

    impl TermLike for Recorder {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("up {n}"));
            Ok(())
        }
        fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
            self.push(format!("down {n}"));
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.push(format!("line {s}"));
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.push(format!("str {s}"));
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            self.push("clear".to_owned());
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_line_clears_the_bar_and_the_bar_is_drawn_again_below_it() {
        let term = Recorder::default();
        let bar = ProgressBar::with_draw_target(
            Some(100),
            ProgressDrawTarget::term_like(Box::new(term.clone())),
        );
        bar.set_style(ProgressStyle::with_template("BAR {pos}/{len}").unwrap());
        bar.set_position(40);
        bar.tick();
        show(Some(&bar));
        suspend_bar(|| term.push("LOG".to_owned()));
        show(None);
        let ops = term.ops();
        let log = ops.iter().position(|o| o == "LOG").unwrap();
        let drawn_before = ops[..log].iter().rposition(|o| o.contains("BAR 40/100"));
        let cleared = ops[..log].iter().rposition(|o| o == "clear");
        assert!(
            drawn_before.is_some() && cleared > drawn_before,
            "the bar was not cleared before the log line: {ops:?}"
        );
        assert!(
            ops[log..].iter().any(|o| o.contains("BAR 40/100")),
            "the bar was not drawn again after the log line: {ops:?}"
        );
        // Without a bar shown, the line is simply written.
        assert_eq!(suspend_bar(|| 7), 7);
    }
}
