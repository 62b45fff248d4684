//! `--metrics-addr ADDR`: what `tern up` and `tern sweep` are doing, served to
//! Prometheus at `http://ADDR/metrics` while they run.
//!
//! tern-core reports through tracing: metric events on
//! [`tern_core::telemetry::METRIC_TARGET`] at every checkpoint, lease renewal
//! and retry. [`MetricsLayer`] turns them into the counters and gauges of a
//! [`prometheus_client`] registry, which a small HTTP/1 endpoint (hyper)
//! encodes on each scrape. The registry is this process's own (no global
//! recorder), so two runs in one process, as in the tests, never mix.
//!
//! The three numbers an operator watches (README "Watching a long run"):
//! `tern_entities_per_second` (is it moving, how fast), `tern_stage_remaining_entities`
//! with `tern_stage_eta_seconds` (how far behind the store's estimate it still
//! is), and `rate(tern_entities_conflicted_total[5m])` with `tern_retries_total`
//! (are the applications fighting it); `tern_lease_renewals_total` keeps rising
//! while the runner is alive.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tern_core::telemetry::{METRIC_TARGET, metric};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context as LayerContext;

/// How far back `tern_entities_per_second` looks.
const RATE_WINDOW: Duration = Duration::from_secs(30);

/// The label of `tern_retries_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RetryLabels {
    what: String,
}

/// The metrics of one process, and what turning events into them needs.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    processed: Counter,
    changed: Counter,
    conflicted: Counter,
    lease_renewals: Counter,
    retries: Family<RetryLabels, Counter>,
    rate: Gauge<f64, AtomicU64>,
    migration: Gauge,
    stage: Gauge,
    estimate: Gauge,
    done: Gauge,
    remaining: Gauge,
    eta: Gauge<f64, AtomicU64>,
    state: Mutex<RunState>,
}

/// What the counters need to count only this run's work.
#[derive(Debug, Default)]
struct RunState {
    /// The migration's cumulative counts at its last event.
    last: [u64; 3],
    /// The store's estimate of the current stage's entities.
    estimate: Option<u64>,
    /// (when, entities processed so far) over the last [`RATE_WINDOW`].
    window: VecDeque<(Instant, u64)>,
    /// Entities processed by this run.
    total: u64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric at zero, registered.
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::default(),
            processed: Counter::default(),
            changed: Counter::default(),
            conflicted: Counter::default(),
            lease_renewals: Counter::default(),
            retries: Family::default(),
            rate: Gauge::default(),
            migration: Gauge::default(),
            stage: Gauge::default(),
            estimate: Gauge::default(),
            done: Gauge::default(),
            remaining: Gauge::default(),
            eta: Gauge::default(),
            state: Mutex::new(RunState::default()),
        };
        let mut r = Registry::with_prefix("tern");
        r.register(
            "entities_processed",
            "Entities read and processed by this run (tern up: every entity a stage read; tern sweep: stale entities read)",
            m.processed.clone(),
        );
        r.register(
            "entities_changed",
            "Entities this run changed (tern up: data changed; tern sweep: entities migrated)",
            m.changed.clone(),
        );
        r.register(
            "entities_conflicted",
            "Writes that met a concurrent change by an application and were re-read",
            m.conflicted.clone(),
        );
        r.register(
            "lease_renewals",
            "Renewals of the migration lock's lease (rises steadily while the runner is alive)",
            m.lease_renewals.clone(),
        );
        r.register(
            "retries",
            "Things tried again: what=\"write\" (entities re-read and written again after a conflict), what=\"lease_renewal\" (failed renewals)",
            m.retries.clone(),
        );
        r.register(
            "entities_per_second",
            "Entities processed per second over the last 30 s",
            m.rate.clone(),
        );
        r.register(
            "migration",
            "The number of the migration running",
            m.migration.clone(),
        );
        r.register(
            "stage",
            "The stage running (from 1) within its migration",
            m.stage.clone(),
        );
        r.register(
            "stage_estimate_entities",
            "The store's estimate of the current stage's entities (0: no estimate)",
            m.estimate.clone(),
        );
        r.register(
            "stage_done_entities",
            "Entities of the current stage processed by this run",
            m.done.clone(),
        );
        r.register(
            "stage_remaining_entities",
            "How far the current stage is behind the store's estimate: estimate minus done (0 without an estimate)",
            m.remaining.clone(),
        );
        r.register(
            "stage_eta_seconds",
            "The remaining entities at the current rate, in seconds (0 while unknown)",
            m.eta.clone(),
        );
        // Both kinds of retry exposed from the start, at 0.
        for what in ["write", "lease_renewal"] {
            m.retries
                .get_or_create(&RetryLabels {
                    what: what.to_owned(),
                })
                .inc_by(0);
        }
        Metrics { registry: r, ..m }
    }

    /// The registry in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts `processed` more entities, for the counter and the rate.
    fn add_processed(&self, state: &mut RunState, processed: u64) {
        self.processed.inc_by(processed);
        state.total += processed;
        let now = Instant::now();
        state.window.push_back((now, state.total));
        while state
            .window
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
            && state.window.len() > 2
        {
            state.window.pop_front();
        }
        if let (Some((t0, n0)), Some((t1, n1))) = (state.window.front(), state.window.back()) {
            let secs = t1.duration_since(*t0).as_secs_f64();
            if secs > 0.0 {
                self.rate.set((n1 - n0) as f64 / secs);
            }
        }
    }

    fn set_remaining(&self, state: &RunState, done: u64) {
        self.done.set(gauge(done));
        let remaining = state.estimate.map_or(0, |e| e.saturating_sub(done));
        self.remaining.set(gauge(remaining));
        let rate = self.rate.get();
        self.eta.set(if remaining > 0 && rate > 0.0 {
            remaining as f64 / rate
        } else {
            0.0
        });
    }

    /// Takes one metric event of tern-core.
    fn record(&self, e: &EventFields) {
        let mut state = self.state();
        match e.metric.as_str() {
            metric::RUN_STARTED => {
                state.last = [e.num("processed"), e.num("changed"), e.num("conflicts")];
                self.migration.set(gauge(e.num("migration")));
            }
            metric::STAGE => {
                self.migration.set(gauge(e.num("migration")));
                self.stage.set(gauge(e.num("stage")));
                state.estimate = e.get("estimate");
                self.estimate.set(gauge(state.estimate.unwrap_or(0)));
                self.set_remaining(&state, 0);
            }
            metric::CHECKPOINT => {
                let now = [e.num("processed"), e.num("changed"), e.num("conflicts")];
                let [p, c, x] = [0, 1, 2].map(|i| now[i].saturating_sub(state.last[i]));
                state.last = now;
                self.changed.inc_by(c);
                self.conflicted.inc_by(x);
                self.add_processed(&mut state, p);
                let done = e.num("done");
                self.set_remaining(&state, done);
            }
            metric::SWEEP_BATCH => {
                self.changed.inc_by(e.num("migrated"));
                self.add_processed(&mut state, e.num("read"));
            }
            metric::LEASE_RENEWAL => {
                self.lease_renewals.inc();
            }
            metric::RETRY => {
                self.retries
                    .get_or_create(&RetryLabels {
                        what: e.what.clone(),
                    })
                    .inc_by(e.num("count").max(1));
            }
            _ => {}
        }
    }
}

/// A gauge's value from a count.
fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The fields of one metric event.
#[derive(Debug, Default)]
struct EventFields {
    metric: String,
    what: String,
    numbers: Vec<(&'static str, u64)>,
}

impl EventFields {
    fn get(&self, name: &str) -> Option<u64> {
        self.numbers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    fn num(&self, name: &str) -> u64 {
        self.get(name).unwrap_or(0)
    }
}

impl Visit for EventFields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.numbers.push((field.name(), value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.numbers
            .push((field.name(), u64::try_from(value).unwrap_or(0)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "metric" => value.clone_into(&mut self.metric),
            "what" => value.clone_into(&mut self.what),
            _ => {}
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

/// The tracing layer that feeds [`Metrics`] (give it a filter on
/// [`METRIC_TARGET`]; it ignores any other event anyway).
#[derive(Debug, Clone)]
pub struct MetricsLayer(pub Arc<Metrics>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for MetricsLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: LayerContext<'_, S>) {
        if event.metadata().target() != METRIC_TARGET {
            return;
        }
        let mut fields = EventFields::default();
        event.record(&mut fields);
        self.0.record(&fields);
    }
}

/// Serves `metrics` at `http://ADDR/metrics` until the process ends. Binds
/// before returning, so that a bad or taken address fails the command at once.
///
/// # Errors
/// When the address cannot be bound, naming it.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics-addr {addr}: cannot listen there"))?;
    let local = listener.local_addr().unwrap_or(addr);
    tracing::info!(%local, "serving metrics at http://{local}/metrics");
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let metrics = Arc::clone(&metrics);
                    async move { Ok::<_, std::convert::Infallible>(respond(&req, &metrics)) }
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await
                {
                    tracing::debug!(error = %e, "metrics endpoint: connection ended");
                }
            });
        }
    });
    Ok(local)
}

type Body = http_body_util::Full<bytes::Bytes>;

fn respond<B>(req: &hyper::Request<B>, metrics: &Metrics) -> hyper::Response<Body> {
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
        (&hyper::Method::GET, "/metrics") => (
            hyper::StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        (&hyper::Method::GET, _) => (
            hyper::StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "tern serves its metrics at /metrics\n".to_owned(),
        ),
        _ => (
            hyper::StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_owned(),
        ),
    };
    let mut response = hyper::Response::new(Body::new(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(metric: &str, numbers: &[(&'static str, u64)]) -> EventFields {
        EventFields {
            metric: metric.to_owned(),
            what: String::new(),
            numbers: numbers.to_vec(),
        }
    }

    #[test]
    fn a_resumed_run_counts_only_its_own_work_and_the_lag_behind_the_estimate() {
        let m = Metrics::new();
        // Resumed with 500 processed (200 changed) by the interrupted run.
        m.record(&event(
            metric::RUN_STARTED,
            &[
                ("migration", 3),
                ("processed", 500),
                ("changed", 200),
                ("conflicts", 1),
            ],
        ));
        m.record(&event(
            metric::STAGE,
            &[("migration", 3), ("stage", 2), ("estimate", 1000)],
        ));
        m.record(&event(
            metric::CHECKPOINT,
            &[
                ("migration", 3),
                ("done", 100),
                ("processed", 600),
                ("changed", 250),
                ("conflicts", 3),
            ],
        ));
        assert_eq!(m.processed.get(), 100);
        assert_eq!(m.changed.get(), 50);
        assert_eq!(m.conflicted.get(), 2);
        assert_eq!(m.remaining.get(), 900);
        assert_eq!(m.stage.get(), 2);
        let text = m.encode();
        assert!(text.contains("tern_entities_processed_total 100"), "{text}");
        assert!(text.contains("tern_stage_remaining_entities 900"), "{text}");
        // Done can outgrow the estimate (writes during the run): no negative lag.
        m.record(&event(
            metric::CHECKPOINT,
            &[
                ("migration", 3),
                ("done", 1200),
                ("processed", 1700),
                ("changed", 250),
                ("conflicts", 3),
            ],
        ));
        assert_eq!(m.remaining.get(), 0);
        assert_eq!(m.processed.get(), 1200);
    }

    #[test]
    fn sweeps_renewals_and_retries_are_counted() {
        let m = Metrics::new();
        m.record(&event(
            metric::SWEEP_BATCH,
            &[("read", 40), ("migrated", 38)],
        ));
        m.record(&event(metric::LEASE_RENEWAL, &[]));
        m.record(&event(metric::LEASE_RENEWAL, &[]));
        let mut retry = event(metric::RETRY, &[("count", 3)]);
        retry.what = "write".to_owned();
        m.record(&retry);
        assert_eq!(m.processed.get(), 40);
        assert_eq!(m.changed.get(), 38);
        assert_eq!(m.lease_renewals.get(), 2);
        let text = m.encode();
        assert!(
            text.contains("tern_retries_total{what=\"write\"} 3"),
            "{text}"
        );
        assert!(text.contains("tern_lease_renewals_total 2"), "{text}");
    }
}
