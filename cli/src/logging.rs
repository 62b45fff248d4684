//! Where log lines and metric events go: a text or JSON log on stderr that
//! steps around the progress bar, and, with `--metrics-addr`, the metrics layer.
//!
//! - `-v`/`-vv` (or `TERN_LOG`, an `EnvFilter` directive) choose what is logged.
//! - `--log-format json` writes one JSON object a line, with the spans the
//!   line happened in (`migration`, `stage`, `batch`: see `tern_core::telemetry`).
//! - Colour only on a terminal, and never when `NO_COLOR` is set to anything
//!   but the empty string (<https://no-color.org>).
//! - A log line written while the progress bar is drawn clears the bar, is
//!   printed, and the bar is drawn again below it
//!   ([`crate::progress::suspend_bar`]): warnings never garble the bar.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use tern_core::telemetry::METRIC_TARGET;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::metrics::{Metrics, MetricsLayer};

/// The format of the log lines (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line, with its spans.
    Json,
}

/// Whether colour codes may be written to stderr: a terminal, and no `NO_COLOR`.
pub fn color_allowed() -> bool {
    no_color_unset(std::env::var_os("NO_COLOR")) && std::io::stderr().is_terminal()
}

fn no_color_unset(value: Option<std::ffi::OsString>) -> bool {
    value.is_none_or(|v| v.is_empty())
}

/// Installs the process's subscriber (`-v` count `verbose`, `--log-format`);
/// returns the metrics it feeds when `--metrics-addr` is given.
pub fn init(
    verbose: u8,
    log_format: LogFormat,
    metrics_addr: Option<std::net::SocketAddr>,
) -> Option<Arc<Metrics>> {
    // The Cassandra driver logs every failed connection attempt as an error of
    // its own; the error tern reports says the same with the URL, so its logs
    // show only from -vv (or with TERN_LOG). Metric events are for the metrics
    // layer, not the log, unless TERN_LOG asks for them.
    let default = match verbose {
        0 => "warn,scylla=off",
        1 => "info,scylla=off,tern::metric=off",
        _ => "debug,tern::metric=off",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TERN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(|| BarAwareStderr)
        .with_ansi(color_allowed());
    let log = match log_format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .boxed(),
    }
    .with_filter(filter);
    let metrics = metrics_addr.map(|_| Arc::new(Metrics::new()));
    let metrics_layer = metrics.as_ref().map(|m| {
        MetricsLayer(Arc::clone(m)).with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            meta.target() == METRIC_TARGET
        }))
    });
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(metrics_layer)
        .try_init();
    metrics
}

/// stderr, around the progress bar: each write (the formatter writes a whole
/// line at once) hides the bar, writes, and draws the bar again.
#[derive(Debug, Clone, Copy)]
struct BarAwareStderr;

impl Write for BarAwareStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        crate::progress::suspend_bar(|| std::io::stderr().lock().write_all(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_set_to_anything_but_empty_turns_colour_off() {
        assert!(no_color_unset(None));
        assert!(no_color_unset(Some("".into())));
        assert!(!no_color_unset(Some("1".into())));
        assert!(!no_color_unset(Some("0".into())));
    }
}
