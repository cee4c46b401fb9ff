//! What the live dashboard draws: scalar series by tag, throughput rates, checkpoints and the
//! latest episodes, kept in bounded memory for the whole run, and a JSON snapshot of them with
//! the current gauges and counters.
//!
//! A series keeps at most [`MAX_POINTS`] points. When it is full it is halved by keeping every
//! other point, and from then on only every other push is kept (the stride doubles), so the
//! points stay evenly spread over the whole run and the shape of the curve survives however
//! long the run is. The newest push is always shown, kept or not.

use crate::Metrics;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most points a series keeps before it is halved.
pub const MAX_POINTS: usize = 2000;
/// How many of the latest episodes are kept.
pub const MAX_EPISODES: usize = 20;
/// How many of the latest checkpoints are kept.
pub const MAX_CHECKPOINTS: usize = 200;
/// The most bytes of an episode's transcript kept (its start and its end).
pub const MAX_TRANSCRIPT_BYTES: usize = 4096;
/// The prefix of every metric name in the registry's text.
const PREFIX: &str = "openclaw_";

/// One finished episode as the dashboard shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeView {
    /// The training step it was played at.
    pub step: u64,
    /// The task's name or id.
    pub task: String,
    /// Its reward.
    pub reward: f64,
    /// Whether the task was solved.
    pub solved: bool,
    /// What was said and done, as text (cut to [`MAX_TRANSCRIPT_BYTES`] when recorded).
    pub transcript: String,
}

/// One point: the step (or tick number), the value and the wall time it was recorded at.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Point {
    step: u64,
    value: f64,
    time: f64,
}

/// A series in bounded memory (see the module's note).
#[derive(Debug, Default)]
struct Series {
    /// Pushes whose index is a multiple of `stride`.
    kept: Vec<Point>,
    /// The newest push when it is not in `kept`.
    latest: Option<Point>,
    /// Pushes so far.
    pushes: u64,
    /// Every how many pushes one is kept; doubles at each halving.
    stride: u64,
}

impl Series {
    fn push(&mut self, p: Point) {
        let stride = self.stride.max(1);
        let index = self.pushes;
        self.pushes += 1;
        if !index.is_multiple_of(stride) {
            self.latest = Some(p);
            return;
        }
        self.kept.push(p);
        self.latest = None;
        if self.kept.len() >= MAX_POINTS {
            // Index MAX_POINTS - 1 is odd, so the point just pushed leaves `kept`; it stays
            // shown as the newest.
            let newest = self.kept.last().copied();
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.latest = newest.filter(|n| self.kept.last() != Some(n));
            self.stride = stride * 2;
        }
    }

    fn points(&self) -> impl Iterator<Item = &Point> {
        self.kept.iter().chain(self.latest.as_ref())
    }

    fn to_json(&self) -> Value {
        Value::Array(
            self.points()
                .map(|p| json!([p.step, p.value, p.time]))
                .collect(),
        )
    }
}

/// The counters a rate is computed from, as read at one tick.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    requests: f64,
    generated_tokens: f64,
    prompt_tokens: f64,
    trained_samples: f64,
    train_steps: f64,
}

#[derive(Debug)]
struct Inner {
    series: BTreeMap<String, Series>,
    rates: BTreeMap<String, Series>,
    last: Option<Reading>,
    ticks: u64,
    checkpoints: VecDeque<(u64, String, f64)>,
    episodes: VecDeque<EpisodeView>,
}

/// What the dashboard draws, recorded by whoever holds the [`Metrics`]; thread-safe.
pub struct History {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for History {
    // Counts only: thousands of points would drown any `{:?}` of the metrics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("History")
            .field("series", &inner.series.len())
            .field("rates", &inner.rates.len())
            .field("checkpoints", &inner.checkpoints.len())
            .field("episodes", &inner.episodes.len())
            .finish_non_exhaustive()
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

/// Seconds since the Unix epoch, to the millisecond (the data's times).
fn unix_now() -> f64 {
    (crate::unix_now() * 1000.0).floor() / 1000.0
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        History {
            inner: Mutex::new(Inner {
                series: BTreeMap::new(),
                rates: BTreeMap::new(),
                last: None,
                ticks: 0,
                checkpoints: VecDeque::new(),
                episodes: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere while recording must not blank the dashboard.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `value` of series `tag` (`train/loss`, `eval/solve_rate`, ...) at `step`, with
    /// the wall time.
    pub fn push(&self, tag: &str, step: u64, value: f64) {
        let p = Point {
            step,
            value,
            time: unix_now(),
        };
        self.lock()
            .series
            .entry(tag.to_string())
            .or_default()
            .push(p);
    }

    /// Reads the counters and records their rates per second since the last tick as
    /// `rate/requests_per_s`, `rate/tokens_per_s` (generated), `rate/prompt_tokens_per_s`,
    /// `rate/samples_per_s` (trained) and `rate/steps_per_s`, numbered by tick; the first tick
    /// only takes the reading. Meant to be called every couple of seconds.
    pub fn tick(&self, metrics: &Metrics) {
        self.tick_at(metrics, Instant::now(), unix_now());
    }

    fn tick_at(&self, metrics: &Metrics, at: Instant, time: f64) {
        let parsed = parse_exposition(&metrics.render());
        let requests = parsed
            .iter()
            .filter(|s| s.name == "openclaw_requests_total")
            .map(|s| s.value)
            .sum();
        let now = Reading {
            at,
            requests,
            generated_tokens: metrics.generated_tokens.get() as f64,
            prompt_tokens: metrics.prompt_tokens.get() as f64,
            trained_samples: metrics.trained_samples.get() as f64,
            train_steps: metrics.train_steps.get() as f64,
        };
        let mut inner = self.lock();
        let Some(before) = inner.last.replace(now) else {
            return;
        };
        let dt = now.at.saturating_duration_since(before.at);
        if dt < Duration::from_millis(1) {
            return;
        }
        let dt = dt.as_secs_f64();
        let step = inner.ticks;
        inner.ticks += 1;
        let rates = [
            ("rate/requests_per_s", now.requests - before.requests),
            (
                "rate/tokens_per_s",
                now.generated_tokens - before.generated_tokens,
            ),
            (
                "rate/prompt_tokens_per_s",
                now.prompt_tokens - before.prompt_tokens,
            ),
            (
                "rate/samples_per_s",
                now.trained_samples - before.trained_samples,
            ),
            ("rate/steps_per_s", now.train_steps - before.train_steps),
        ];
        for (tag, delta) in rates {
            let p = Point {
                step,
                value: delta.max(0.0) / dt,
                time,
            };
            inner.rates.entry(tag.to_string()).or_default().push(p);
        }
    }

    /// Records a checkpoint written at `step` to `path`.
    pub fn checkpoint(&self, step: u64, path: &str) {
        let mut inner = self.lock();
        if inner.checkpoints.len() >= MAX_CHECKPOINTS {
            inner.checkpoints.pop_front();
        }
        inner
            .checkpoints
            .push_back((step, path.to_string(), unix_now()));
    }

    /// Records a finished episode; the last [`MAX_EPISODES`] are kept, each transcript cut to
    /// [`MAX_TRANSCRIPT_BYTES`].
    pub fn episode(&self, mut episode: EpisodeView) {
        episode.transcript = cut_transcript(&episode.transcript, MAX_TRANSCRIPT_BYTES);
        let mut inner = self.lock();
        if inner.episodes.len() >= MAX_EPISODES {
            inner.episodes.pop_front();
        }
        inner.episodes.push_back(episode);
    }

    /// Everything the dashboard draws, as JSON:
    ///
    /// ```json
    /// { "series": {"train/loss": [[step, value, unix_time], ...]},
    ///   "rates": {"rate/tokens_per_s": [[tick, value, unix_time], ...]},
    ///   "gauges": {"queue_depth": {"judge": 3}, "weight_version": 4, ...},
    ///   "counters": {"judge_votes": {"+1": 7}, "requests": {"chat/200": 9}, ...},
    ///   "histograms": {"judge_seconds": {"count": 3, "sum": 1.2}, ...},
    ///   "checkpoints": [{"step": 10, "path": "...", "time": unix_time}],
    ///   "episodes": [{"step", "task", "reward", "solved", "transcript"}],
    ///   "now": unix_time }
    /// ```
    ///
    /// Metric names lose their `openclaw_` prefix and a counter's `_total`; a labelled metric
    /// is an object keyed by its label values joined with `/` in the order it was labelled.
    /// Episodes come newest first; a value that is not finite is `null`.
    pub fn snapshot(&self, metrics: &Metrics) -> Value {
        let exposition = parse_exposition(&metrics.render());
        let inner = self.lock();
        let series = |m: &BTreeMap<String, Series>| {
            Value::Object(m.iter().map(|(k, s)| (k.clone(), s.to_json())).collect())
        };
        let checkpoints: Vec<Value> = inner
            .checkpoints
            .iter()
            .map(|(step, path, time)| json!({"step": step, "path": path, "time": time}))
            .collect();
        let episodes: Vec<Value> = inner
            .episodes
            .iter()
            .rev()
            .map(|e| {
                json!({
                    "step": e.step,
                    "task": e.task,
                    "reward": e.reward,
                    "solved": e.solved,
                    "transcript": e.transcript,
                })
            })
            .collect();
        let (gauges, counters, histograms) = group(&exposition);
        json!({
            "series": series(&inner.series),
            "rates": series(&inner.rates),
            "gauges": gauges,
            "counters": counters,
            "histograms": histograms,
            "checkpoints": checkpoints,
            "episodes": episodes,
            "now": unix_now(),
        })
    }
}

/// `text` cut to at most about `max` bytes on char boundaries: its start and its end, with a
/// line in between saying how much was left out (the task is at the start, the outcome at
/// the end).
fn cut_transcript(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut head = max / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - max / 2;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[… {} bytes left out …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// A sample's labels, as `(name, value)` pairs in the order written.
type Labels = Vec<(String, String)>;

/// One sample line of the Prometheus text exposition, with the type its family declared.
#[derive(Debug, PartialEq)]
struct Sample {
    name: String,
    labels: Labels,
    value: f64,
    kind: String,
}

/// The sample lines of a Prometheus text exposition (`name{k="v",...} value`), each with the
/// `# TYPE` of its family; lines it cannot read are skipped.
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                types.insert(name.to_string(), kind.trim().to_string());
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((name, labels, rest)) = split_sample(line) else {
            continue;
        };
        let Some(value) = rest
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        else {
            continue;
        };
        // A family's samples carry suffixes (`_total`, `_sum`, `_count`, `_bucket`) its
        // `# TYPE` line does not.
        let kind = ["", "_total", "_sum", "_count", "_bucket", "_created"]
            .iter()
            .find_map(|suffix| types.get(name.strip_suffix(suffix)?))
            .cloned()
            .unwrap_or_default();
        out.push(Sample {
            name: name.to_string(),
            labels,
            value,
            kind,
        });
    }
    out
}

/// A sample line's name, its labels and what follows them.
fn split_sample(line: &str) -> Option<(&str, Labels, &str)> {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let rest = &line[name_end..];
    let Some(body) = rest.strip_prefix('{') else {
        return Some((name, Vec::new(), rest));
    };
    let mut labels = Vec::new();
    let mut chars = body.char_indices();
    loop {
        let mut key = String::new();
        let mut c = chars.next()?;
        while c.1 == ',' || c.1 == ' ' {
            c = chars.next()?;
        }
        if c.1 == '}' {
            return Some((name, labels, &body[c.0 + 1..]));
        }
        while c.1 != '=' {
            key.push(c.1);
            c = chars.next()?;
        }
        if chars.next()?.1 != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()?.1 {
                '"' => break,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                other => value.push(other),
            }
        }
        labels.push((key, value));
    }
}

/// The samples grouped for the snapshot: gauges, counters and histograms (count and sum), by
/// name without the prefix (and a counter's `_total`), labelled ones keyed by label values.
fn group(samples: &[Sample]) -> (Value, Value, Value) {
    let mut gauges = Map::new();
    let mut counters = Map::new();
    let mut histograms = Map::new();
    let number = |v: f64| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
    let key = |labels: &[(String, String)]| {
        labels
            .iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join("/")
    };
    for s in samples {
        let bare = s.name.strip_prefix(PREFIX).unwrap_or(&s.name);
        let (map, name, field) = match s.kind.as_str() {
            "gauge" => (&mut gauges, bare, None),
            "counter" => match bare.strip_suffix("_total") {
                Some(n) => (&mut counters, n, None),
                None => continue,
            },
            "histogram" => {
                if let Some(n) = bare.strip_suffix("_sum") {
                    (&mut histograms, n, Some("sum"))
                } else if let Some(n) = bare.strip_suffix("_count") {
                    (&mut histograms, n, Some("count"))
                } else {
                    continue;
                }
            }
            _ => continue,
        };
        let labels: Vec<_> = s
            .labels
            .iter()
            .filter(|(k, _)| k != "le")
            .cloned()
            .collect();
        // The place of this sample: the metric itself, or its entry by label values.
        let slot = if labels.is_empty() {
            map.entry(name.to_string()).or_insert(Value::Null)
        } else {
            let entry = map
                .entry(name.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            entry
                .as_object_mut()
                .expect("made an object above")
                .entry(key(&labels))
                .or_insert(Value::Null)
        };
        match field {
            None => *slot = number(s.value),
            Some(f) => {
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                slot.as_object_mut()
                    .expect("made an object above")
                    .insert(f.to_string(), number(s.value));
            }
        }
    }
    (
        Value::Object(gauges),
        Value::Object(counters),
        Value::Object(histograms),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_series_halves_and_keeps_the_whole_run_evenly() {
        let h = History::new();
        let n = 10 * MAX_POINTS as u64 + 7;
        for step in 0..n {
            h.push("train/loss", step, step as f64);
        }
        let m = Metrics::new();
        let snap = h.snapshot(&m);
        let points = snap["series"]["train/loss"].as_array().unwrap();
        assert!(points.len() <= MAX_POINTS + 1, "{}", points.len());
        assert!(points.len() >= MAX_POINTS / 2, "{}", points.len());
        let steps: Vec<u64> = points.iter().map(|p| p[0].as_u64().unwrap()).collect();
        assert_eq!(steps[0], 0, "the start of the run stays");
        assert_eq!(*steps.last().unwrap(), n - 1, "the newest push is shown");
        // Evenly spread: every kept gap is the same stride.
        let kept = &steps[..steps.len() - 1];
        let stride = kept[1] - kept[0];
        assert!(stride > 1);
        assert!(kept.windows(2).all(|w| w[1] - w[0] == stride), "{kept:?}");
        assert!(n - 1 - kept.last().unwrap() <= stride);
    }

    #[test]
    fn a_series_below_the_bound_keeps_every_point() {
        let h = History::new();
        for step in 0..MAX_POINTS as u64 - 1 {
            h.push("eval/solve_rate", step, 0.5);
        }
        let snap = h.snapshot(&Metrics::new());
        assert_eq!(
            snap["series"]["eval/solve_rate"].as_array().unwrap().len(),
            MAX_POINTS - 1
        );
        h.push("eval/solve_rate", 10_000, 0.75);
        let snap = h.snapshot(&Metrics::new());
        let points = snap["series"]["eval/solve_rate"].as_array().unwrap();
        assert_eq!(points.len(), MAX_POINTS / 2 + 1);
        assert_eq!(points.last().unwrap()[0], 10_000);
        assert_eq!(points.last().unwrap()[1], 0.75);
    }

    #[test]
    fn the_snapshot_has_every_part_the_dashboard_reads() {
        let m = Metrics::new();
        m.history.push("train/loss", 1, 0.5);
        m.history.push("train/kl", 1, f64::NAN);
        m.history.checkpoint(10, "/save/checkpoint-10");
        for i in 0..MAX_EPISODES as u64 + 5 {
            m.history.episode(EpisodeView {
                step: i,
                task: format!("task-{i}"),
                reward: 1.0,
                solved: i.is_multiple_of(2),
                transcript: "user: hi\nassistant: hello".into(),
            });
        }
        m.queue_depth
            .get_or_create(&Metrics::label("queue", "judge"))
            .set(3);
        m.judge_votes
            .get_or_create(&Metrics::label("vote", "+1"))
            .inc_by(7);
        m.judge_failures
            .get_or_create(&Metrics::label("reason", "timeout"))
            .inc();
        m.queue_overflow
            .get_or_create(&vec![
                ("queue".into(), "collect".into()),
                ("policy".into(), "drop".into()),
            ])
            .inc_by(2);
        m.requests
            .get_or_create(&vec![
                ("endpoint".into(), "chat".into()),
                ("status".into(), "200".into()),
            ])
            .inc();
        m.weight_version.set(4);
        m.stale_dropped.inc();
        m.judge_seconds.observe(0.5);
        let s = m.history.snapshot(&m);
        assert_eq!(s["series"]["train/loss"][0][0], 1);
        assert_eq!(s["series"]["train/loss"][0][1], 0.5);
        assert!(s["series"]["train/loss"][0][2].as_f64().unwrap() > 1.6e9);
        assert!(s["series"]["train/kl"][0][1].is_null());
        assert!(s["rates"].is_object());
        assert_eq!(s["gauges"]["queue_depth"]["judge"], 3.0);
        assert_eq!(s["gauges"]["weight_version"], 4.0);
        assert_eq!(s["gauges"]["inflight_requests"], 0.0);
        assert_eq!(s["gauges"]["prefix_cache_bytes"], 0.0);
        assert_eq!(s["counters"]["judge_votes"]["+1"], 7.0);
        assert_eq!(s["counters"]["judge_failures"]["timeout"], 1.0);
        assert_eq!(s["counters"]["queue_overflow"]["collect/drop"], 2.0);
        assert_eq!(s["counters"]["requests"]["chat/200"], 1.0);
        assert_eq!(s["counters"]["stale_dropped"], 1.0);
        assert_eq!(s["histograms"]["judge_seconds"]["count"], 1.0);
        assert_eq!(s["histograms"]["judge_seconds"]["sum"], 0.5);
        assert_eq!(s["checkpoints"][0]["step"], 10);
        assert_eq!(s["checkpoints"][0]["path"], "/save/checkpoint-10");
        let episodes = s["episodes"].as_array().unwrap();
        assert_eq!(episodes.len(), MAX_EPISODES);
        assert_eq!(episodes[0]["task"], "task-24", "newest first");
        assert_eq!(episodes[0]["solved"], true);
        assert!(s["now"].as_f64().unwrap() > 1.6e9);
    }

    #[test]
    fn a_long_transcript_is_cut_on_char_boundaries_keeping_both_ends() {
        // Three-byte characters, so a byte count in the middle of one is likely.
        let text = format!("TASK {} END", "€".repeat(5000));
        let cut = cut_transcript(&text, MAX_TRANSCRIPT_BYTES);
        assert!(cut.len() <= MAX_TRANSCRIPT_BYTES + 64, "{}", cut.len());
        assert!(cut.starts_with("TASK "));
        assert!(cut.ends_with(" END"));
        assert!(cut.contains("bytes left out"));
        for max in [1, 2, 3, 4, 5, 100, 101, 102] {
            let c = cut_transcript(&text, max);
            assert!(c.len() <= max + 64, "{max}: {}", c.len());
        }
        assert_eq!(cut_transcript("short", MAX_TRANSCRIPT_BYTES), "short");

        let h = History::new();
        h.episode(EpisodeView {
            step: 0,
            task: "t".into(),
            reward: 0.0,
            solved: false,
            transcript: text,
        });
        let s = h.snapshot(&Metrics::new());
        let t = s["episodes"][0]["transcript"].as_str().unwrap();
        assert!(t.len() <= MAX_TRANSCRIPT_BYTES + 64);
    }

    #[test]
    fn a_tick_records_each_counters_rate_per_second() {
        let m = Metrics::new();
        let t0 = Instant::now();
        m.generated_tokens.inc_by(100);
        m.history.tick_at(&m, t0, 1000.0);
        assert!(m.history.snapshot(&m)["rates"]
            .as_object()
            .unwrap()
            .is_empty());
        m.generated_tokens.inc_by(200);
        m.prompt_tokens.inc_by(50);
        m.trained_samples.inc_by(8);
        m.train_steps.inc();
        for status in ["200", "400", "200", "200"] {
            m.requests
                .get_or_create(&vec![
                    ("endpoint".into(), "chat".into()),
                    ("status".into(), status.into()),
                ])
                .inc();
        }
        m.history.tick_at(&m, t0 + Duration::from_secs(2), 1002.0);
        let s = m.history.snapshot(&m);
        let rate = |tag: &str| s["rates"][tag][0][1].as_f64().unwrap();
        assert_eq!(rate("rate/tokens_per_s"), 100.0);
        assert_eq!(rate("rate/prompt_tokens_per_s"), 25.0);
        assert_eq!(rate("rate/samples_per_s"), 4.0);
        assert_eq!(rate("rate/steps_per_s"), 0.5);
        assert_eq!(rate("rate/requests_per_s"), 2.0);
        assert_eq!(s["rates"]["rate/tokens_per_s"][0][2], 1002.0);
    }

    #[test]
    fn exposition_lines_are_read_with_escaped_labels() {
        let text = "# TYPE openclaw_x counter\nopenclaw_x_total{a=\"q\\\"u\\\\o\\nte\",b=\"2\"} 5\n# TYPE openclaw_g gauge\nopenclaw_g 1.5\nbroken{a=\"1 2\n# EOF\n";
        let s = parse_exposition(text);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].name, "openclaw_x_total");
        assert_eq!(s[0].kind, "counter");
        assert_eq!(
            s[0].labels,
            vec![
                ("a".to_string(), "q\"u\\o\nte".to_string()),
                ("b".to_string(), "2".to_string())
            ]
        );
        assert_eq!(s[0].value, 5.0);
        assert_eq!(s[1].kind, "gauge");
        assert_eq!(s[1].value, 1.5);
    }
}
