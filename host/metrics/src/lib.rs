//! The host's metrics, served as Prometheus text at `/metrics`, the history the live dashboard
//! draws ([`history`]), and a writer of TensorBoard event files ([`tensorboard`]).

pub mod history;
pub mod progress;
pub mod record;
pub mod tensorboard;

pub use history::{EpisodeView, History};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Seconds since the Unix epoch (0 on a clock before it): the wall time of recorded points.
pub(crate) fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Every metric of a process, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests by endpoint and HTTP status.
    pub requests: Family<Vec<(String, String)>, Counter>,
    /// Seconds from request to the last byte.
    pub request_seconds: Histogram,
    /// Seconds from request to the first token.
    pub ttft_seconds: Histogram,
    /// Tokens generated.
    pub generated_tokens: Counter,
    /// Prompt tokens processed.
    pub prompt_tokens: Counter,
    /// Prompt tokens whose keys and values came from the prefix cache instead of a prefill.
    pub prefix_reused_tokens: Counter,
    /// Bytes of keys and values the prefix cache holds.
    pub prefix_cache_bytes: Gauge,
    /// Requests waiting for or in generation.
    pub inflight_requests: Gauge,
    /// Queue depths by queue name.
    pub queue_depth: Family<Vec<(String, String)>, Gauge>,
    /// Items a queue turned away, by queue and policy.
    pub queue_overflow: Family<Vec<(String, String)>, Counter>,
    /// The weight version serving now.
    pub weight_version: Gauge,
    /// How many weight versions behind a sample was when trained.
    pub sample_staleness: Histogram,
    /// Samples dropped for being staler than allowed.
    pub stale_dropped: Counter,
    /// Seconds per judge call (one turn, all votes).
    pub judge_seconds: Histogram,
    /// Judge calls that failed after their retries, by reason.
    pub judge_failures: Family<Vec<(String, String)>, Counter>,
    /// Plugin calls abandoned past their deadline, by plugin and kind.
    pub plugin_calls_abandoned: Family<Vec<(String, String)>, Counter>,
    /// Turns judged, by outcome (`trainable`, `not_trainable`).
    pub judged: Family<Vec<(String, String)>, Counter>,
    /// Outcome votes of the judges, by vote (`+1`, `0`, `-1`, `unparseable`).
    pub judge_votes: Family<Vec<(String, String)>, Counter>,
    /// Turns scored, by whether they had a next state (`yes`, `no`).
    pub judged_turns: Family<Vec<(String, String)>, Counter>,
    /// Optimizer steps taken.
    pub train_steps: Counter,
    /// Samples in the optimizer steps taken (the dashboard's samples per second).
    pub trained_samples: Counter,
    /// The last training loss.
    pub train_loss: Gauge<f64, AtomicU64>,
    /// Training steps that failed one after another (0 after a step succeeds).
    pub train_failed_in_a_row: Gauge,
    /// Why the last training step failed, while steps keep failing (for `/healthz`).
    pub train_failing: std::sync::Mutex<Option<String>>,
    /// What the live dashboard draws: series by tag, rates, checkpoints, episodes.
    pub history: History,
    /// Where recorded scalars also go with `--tensorboard-dir` ([`Metrics::record`]).
    tensorboard: std::sync::Mutex<Option<tensorboard::EventWriter>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

impl Metrics {
    /// A fresh set of metrics.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("openclaw");
        let m = Metrics {
            requests: Family::default(),
            request_seconds: latency(),
            ttft_seconds: latency(),
            generated_tokens: Counter::default(),
            prompt_tokens: Counter::default(),
            prefix_reused_tokens: Counter::default(),
            prefix_cache_bytes: Gauge::default(),
            inflight_requests: Gauge::default(),
            queue_depth: Family::default(),
            queue_overflow: Family::default(),
            weight_version: Gauge::default(),
            sample_staleness: Histogram::new([0.0, 1.0, 2.0, 3.0, 4.0, 8.0, 16.0]),
            stale_dropped: Counter::default(),
            judge_seconds: latency(),
            judge_failures: Family::default(),
            plugin_calls_abandoned: Family::default(),
            judged: Family::default(),
            judge_votes: Family::default(),
            judged_turns: Family::default(),
            train_steps: Counter::default(),
            trained_samples: Counter::default(),
            train_loss: Gauge::default(),
            train_failed_in_a_row: Gauge::default(),
            train_failing: std::sync::Mutex::new(None),
            history: History::new(),
            tensorboard: std::sync::Mutex::new(None),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "HTTP requests by endpoint and status",
            m.requests.clone(),
        );
        registry.register(
            "request_seconds",
            "Request latency",
            m.request_seconds.clone(),
        );
        registry.register(
            "ttft_seconds",
            "Time to first token",
            m.ttft_seconds.clone(),
        );
        registry.register(
            "prefix_reused_tokens",
            "Prompt tokens served from the prefix cache",
            m.prefix_reused_tokens.clone(),
        );
        registry.register(
            "prefix_cache_bytes",
            "Bytes the prefix cache holds",
            m.prefix_cache_bytes.clone(),
        );
        registry.register(
            "generated_tokens",
            "Tokens generated",
            m.generated_tokens.clone(),
        );
        registry.register(
            "prompt_tokens",
            "Prompt tokens processed",
            m.prompt_tokens.clone(),
        );
        registry.register(
            "train_failed_in_a_row",
            "Training steps that failed one after another",
            m.train_failed_in_a_row.clone(),
        );
        registry.register(
            "inflight_requests",
            "Requests waiting for or in generation",
            m.inflight_requests.clone(),
        );
        registry.register(
            "queue_depth",
            "Items waiting in each queue",
            m.queue_depth.clone(),
        );
        registry.register(
            "queue_overflow",
            "Items a full queue turned away",
            m.queue_overflow.clone(),
        );
        registry.register(
            "weight_version",
            "Weight version serving now",
            m.weight_version.clone(),
        );
        registry.register(
            "sample_staleness",
            "Weight versions a trained sample lagged",
            m.sample_staleness.clone(),
        );
        registry.register(
            "stale_dropped",
            "Samples dropped as too stale",
            m.stale_dropped.clone(),
        );
        registry.register(
            "judge_seconds",
            "Judge latency per turn",
            m.judge_seconds.clone(),
        );
        registry.register(
            "judge_failures",
            "Judge calls that failed after retries",
            m.judge_failures.clone(),
        );
        registry.register(
            "plugin_calls_abandoned",
            "Plugin calls abandoned past their deadline",
            m.plugin_calls_abandoned.clone(),
        );
        registry.register("judged", "Turns judged by outcome", m.judged.clone());
        registry.register(
            "judge_votes",
            "Outcome votes of the judges by vote",
            m.judge_votes.clone(),
        );
        registry.register(
            "judged_turns",
            "Turns scored by whether they had a next state",
            m.judged_turns.clone(),
        );
        registry.register("train_steps", "Optimizer steps", m.train_steps.clone());
        registry.register(
            "trained_samples",
            "Samples in optimizer steps",
            m.trained_samples.clone(),
        );
        registry.register("train_loss", "Last training loss", m.train_loss.clone());
        Metrics { registry, ..m }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }

    /// A label set of one pair.
    pub fn label(k: &str, v: &str) -> Vec<(String, String)> {
        vec![(k.to_string(), v.to_string())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_render_as_prometheus_text() {
        let m = Metrics::new();
        m.requests
            .get_or_create(&vec![
                ("endpoint".into(), "chat".into()),
                ("status".into(), "200".into()),
            ])
            .inc();
        m.ttft_seconds.observe(0.02);
        m.queue_depth
            .get_or_create(&Metrics::label("queue", "judge"))
            .set(3);
        m.weight_version.set(4);
        let text = m.render();
        assert!(
            text.contains("openclaw_requests_total{endpoint=\"chat\",status=\"200\"} 1"),
            "{text}"
        );
        assert!(text.contains("openclaw_ttft_seconds_count 1"), "{text}");
        assert!(
            text.contains("openclaw_queue_depth{queue=\"judge\"} 3"),
            "{text}"
        );
        assert!(text.contains("openclaw_weight_version 4"), "{text}");
    }
}

#[cfg(test)]
mod documented {
    use super::*;

    /// The metric names of `docs/operating.md`'s table, as registered (counters without
    /// `_total`, as their `# TYPE` line names them).
    fn documented() -> Vec<String> {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operating.md"),
        )
        .unwrap();
        doc.lines()
            .filter_map(|l| l.strip_prefix("| `openclaw_"))
            .map(|l| {
                let name = &l[..l.find('`').unwrap()];
                format!("openclaw_{}", name.trim_end_matches("_total"))
            })
            .collect()
    }

    #[test]
    fn every_registered_metric_is_documented_and_every_documented_one_registered() {
        let m = Metrics::new();
        // A labelled family prints its type only once it has a sample.
        let two = |a: &str, b: &str| {
            vec![
                (a.to_string(), "x".to_string()),
                (b.to_string(), "y".to_string()),
            ]
        };
        m.requests.get_or_create(&two("endpoint", "status")).inc();
        m.queue_depth
            .get_or_create(&Metrics::label("queue", "x"))
            .set(1);
        m.queue_overflow
            .get_or_create(&Metrics::label("queue", "x"))
            .inc();
        m.judge_failures
            .get_or_create(&Metrics::label("reason", "x"))
            .inc();
        m.plugin_calls_abandoned
            .get_or_create(&two("plugin", "kind"))
            .inc();
        m.judged
            .get_or_create(&Metrics::label("outcome", "x"))
            .inc();
        m.judge_votes
            .get_or_create(&Metrics::label("vote", "x"))
            .inc();
        m.judged_turns
            .get_or_create(&Metrics::label("next_state", "x"))
            .inc();
        let text = m.render();
        let registered: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect();
        let mut documented = documented();
        let mut registered_sorted = registered.clone();
        documented.sort();
        registered_sorted.sort();
        assert_eq!(
            documented, registered_sorted,
            "docs/operating.md vs the registry"
        );
    }
}
