//! The judge pool: `--num-judge-workers` threads that run the method's reward plugin on turns
//! that got their next state (or whose session closed), with retries, and hand each verdict on.
//!
//! Overflow: the job queue is bounded; `submit` blocks the caller (the collection loop) while
//! it is full, which slows collection rather than losing a turn. Every turn is already in the
//! durable buffer, so nothing is lost if the process dies with jobs queued: they are judged
//! again on replay.

use openclaw_metrics::Metrics;
use openclaw_plugin_api::{PluginKind, Score, ScoreRequest};
use openclaw_plugins::{watch, RewardHandle};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One turn to judge.
#[derive(Clone, Debug)]
pub struct JudgeJob {
    /// The buffer sequence number of the turn's record.
    pub turn_seq: u64,
    /// What the reward plugin is asked.
    pub request: ScoreRequest,
    /// A user's explicit feedback on the turn, and how it meets the reward plugin
    /// ([`crate::FeedbackRule::job`]).
    pub feedback: Option<crate::feedback::GivenFeedback>,
    /// The user adapter that answered the turn, when that adapter trains on it
    /// (`run --adapters per-user`): its sample trains that adapter, not the shared policy.
    pub adapter: Option<String>,
}

/// What became of a job.
#[derive(Debug)]
pub struct JudgeOutcome {
    /// The job.
    pub job: JudgeJob,
    /// The verdict, or the last error after every attempt failed.
    pub result: Result<Score, String>,
    /// Attempts made.
    pub attempts: u32,
    /// Time from the first attempt to the outcome.
    pub elapsed: Duration,
}

/// Settings of the pool.
#[derive(Clone, Copy, Debug)]
pub struct PoolOptions {
    /// Worker threads.
    pub workers: usize,
    /// Jobs that may wait.
    pub queue: usize,
    /// Attempts per job (at least 1).
    pub attempts: u32,
    /// Pause before a retry (doubles each time).
    pub backoff: Duration,
    /// `--judge-timeout`: a reward call longer than this for each vote and one more is
    /// abandoned (see [`score_within`]): the job fails with a timeout (the turn is judged again
    /// at the next start) and the call is left to finish on its own thread.
    pub timeout: Duration,
}

/// A running pool.
pub struct JudgePool {
    tx: Option<SyncSender<JudgeJob>>,
    workers: Vec<JoinHandle<()>>,
    metrics: Arc<Metrics>,
    depth: Arc<std::sync::atomic::AtomicI64>,
    /// Set by `close`: queued jobs are dropped (their turns are in the buffer, and the next
    /// start judges them), so a stop does not wait for a backlog.
    closing: Arc<std::sync::atomic::AtomicBool>,
}

impl JudgePool {
    /// Starts the workers. `done` receives every outcome, from the worker threads.
    pub fn start(
        reward: Arc<RewardHandle>,
        opts: PoolOptions,
        metrics: Arc<Metrics>,
        done: Arc<dyn Fn(JudgeOutcome) + Send + Sync>,
    ) -> JudgePool {
        let (tx, rx) = sync_channel::<JudgeJob>(opts.queue.max(1));
        let rx: Arc<Mutex<Receiver<JudgeJob>>> = Arc::new(Mutex::new(rx));
        let depth = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let closing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers = (0..opts.workers.max(1))
            .map(|i| {
                let rx = rx.clone();
                let reward = reward.clone();
                let metrics = metrics.clone();
                let done = done.clone();
                let depth = depth.clone();
                let closing = closing.clone();
                std::thread::Builder::new()
                    .name(format!("judge-{i}"))
                    .spawn(move || loop {
                        let job = match rx.lock() {
                            Ok(r) => match r.recv() {
                                Ok(j) => j,
                                Err(_) => return, // the pool was closed
                            },
                            Err(_) => return,
                        };
                        let d = depth.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) - 1;
                        metrics
                            .queue_depth
                            .get_or_create(&Metrics::label("queue", "judge"))
                            .set(d);
                        if closing.load(std::sync::atomic::Ordering::SeqCst) {
                            continue;
                        }
                        done(run_job(&reward, job, &opts, &metrics, &closing));
                    })
                    .expect("spawn a judge worker")
            })
            .collect();
        JudgePool {
            tx: Some(tx),
            workers,
            metrics,
            depth,
            closing,
        }
    }

    /// Queues a job, waiting while the queue is full.
    pub fn submit(&self, job: JudgeJob) -> Result<(), String> {
        let tx = self.tx.as_ref().ok_or("the judge pool is closed")?;
        let d = self.depth.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        self.metrics
            .queue_depth
            .get_or_create(&Metrics::label("queue", "judge"))
            .set(d);
        tx.send(job)
            .map_err(|_| "the judge pool is closed".to_string())
    }

    /// Jobs waiting.
    pub fn depth(&self) -> i64 {
        self.depth.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops taking jobs, drops the queued ones (the next start judges them), lets the calls
    /// under way finish and joins the workers.
    pub fn close(mut self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.tx.take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn run_job(
    reward: &Arc<RewardHandle>,
    job: JudgeJob,
    opts: &PoolOptions,
    metrics: &Metrics,
    closing: &std::sync::atomic::AtomicBool,
) -> JudgeOutcome {
    let start = Instant::now();
    if let Some(score) = job.feedback.as_ref().and_then(|f| f.verdict()) {
        metrics
            .judged
            .get_or_create(&Metrics::label("outcome", "feedback"))
            .inc();
        return JudgeOutcome {
            job,
            result: Ok(score),
            attempts: 0,
            elapsed: start.elapsed(),
        };
    }
    let mut attempts = 0;
    let mut backoff = opts.backoff;
    let result = loop {
        attempts += 1;
        let r = score_within(reward, &job.request, opts.timeout, Some(metrics))
            .and_then(|score| vote_given(score).map_err(str::to_string))
            .map(|score| match &job.feedback {
                Some(f) => f.merge(score, &job.request.judge),
                None => score,
            });
        match r {
            Ok(score) if score.value.is_finite() => break Ok(score),
            Ok(score) => {
                break Err(format!(
                    "the reward plugin returned a non-finite score {}",
                    score.value
                ))
            }
            // A hung plugin is not called again: each retry would leave another thread behind.
            Err(e)
                if attempts >= opts.attempts.max(1)
                    || e.starts_with(ABANDONED)
                    || closing.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                count_failure(metrics, &e);
                break Err(e);
            }
            Err(e) => {
                count_failure(metrics, &e);
                tracing::warn!(
                    session = job.request.turn.session_id.as_str(),
                    turn = job.request.turn.turn_index,
                    "judging failed (attempt {attempts}), retrying: {e}"
                );
                std::thread::sleep(backoff);
                backoff *= 2;
            }
        }
    };
    metrics.judge_seconds.observe(start.elapsed().as_secs_f64());
    match &result {
        Ok(s) => {
            metrics
                .judged
                .get_or_create(&Metrics::label(
                    "outcome",
                    if s.trainable {
                        "trainable"
                    } else {
                        "not_trainable"
                    },
                ))
                .inc();
        }
        Err(e) => {
            tracing::warn!(
                session = job.request.turn.session_id.as_str(),
                turn = job.request.turn.turn_index,
                "judging failed after {attempts} attempts; the turn is judged again at the next start: {e}"
            );
        }
    }
    JudgeOutcome {
        job,
        result,
        attempts,
        elapsed: start.elapsed(),
    }
}

/// `score`, unless the judge was asked and none of its answers held a vote: that is a failed
/// call (retried, counted as `no_vote`, the turn judged again later), never a score.
pub fn vote_given(score: Score) -> Result<Score, &'static str> {
    if score.votes.is_empty() && score.invalid_votes > 0 {
        return Err(NO_VOTE);
    }
    Ok(score)
}

/// How a judging failure with answers but no vote reads.
const NO_VOTE: &str = "the judge answered without a vote in any of its answers";

/// How an abandoned call's error begins.
const ABANDONED: &str = "abandoned after";

/// Abandoned reward calls still running past which the plugin is no longer called.
const MAX_ABANDONED: usize = 4;

/// Runs one reward call on a thread of its own and waits at most its budget: `judge_timeout`
/// (`--judge-timeout`, the limit of each judge request) for each of the request's votes and one
/// more (a method may ask a second judge, as combine's hint judge). A call past it is
/// abandoned: a thread cannot be stopped, so it is left to finish (its result dropped) at the
/// lowest scheduling priority, counted in `plugin_calls_abandoned_total` (when `metrics` are
/// given) and warned about. Every reward call of a run goes through here.
pub fn score_within(
    reward: &Arc<RewardHandle>,
    request: &ScoreRequest,
    judge_timeout: Duration,
    metrics: Option<&Metrics>,
) -> Result<Score, String> {
    let calls = request.judge.votes.clamp(1, 1024) + 1;
    let timeout = judge_timeout.saturating_mul(calls);
    // Each abandoned call keeps a thread (spinning, perhaps); past a few, the plugin is not
    // called again in this run and its turns wait for the next start.
    let running = watch::abandoned(reward.plugin(), PluginKind::Reward);
    if running >= MAX_ABANDONED {
        return Err(format!(
            "{ABANDONED} earlier calls: plugin `{}` has {running} reward calls still running past \
             --judge-timeout and is not called again",
            reward.plugin()
        ));
    }
    let (tx, rx) = sync_channel(1);
    let tid = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let (r, req, t) = (reward.clone(), request.clone(), tid.clone());
    std::thread::Builder::new()
        .name("reward-call".into())
        .spawn(move || {
            t.store(watch::thread_id(), std::sync::atomic::Ordering::SeqCst);
            let _ = tx.send(r.score(&req).map_err(|e| format!("{e:#}")));
        })
        .map_err(|e| format!("cannot start a reward call: {e}"))?;
    match rx.recv_timeout(timeout) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => {
            let tid = tid.load(std::sync::atomic::Ordering::SeqCst);
            watch::abandon(tid);
            watch::lower_priority(tid);
            if let Some(m) = metrics {
                m.plugin_calls_abandoned
                    .get_or_create(&vec![
                        ("plugin".to_string(), reward.plugin().to_string()),
                        ("kind".to_string(), "reward".to_string()),
                    ])
                    .inc();
            }
            tracing::warn!(
                plugin = reward.plugin(),
                "a reward call ran past its budget ({} s: --judge-timeout for each vote and one \
                 more) and was abandoned; its thread keeps running at the lowest priority until \
                 it returns",
                timeout.as_secs_f64()
            );
            Err(format!(
                "{ABANDONED} {:.0} s (--judge-timeout per judge call): plugin `{}` did not return",
                timeout.as_secs_f64(),
                reward.plugin()
            ))
        }
        Err(RecvTimeoutError::Disconnected) => {
            Err(format!("plugin `{}` (reward) panicked", reward.plugin()))
        }
    }
}

/// Counts one failed judging attempt by its kind: `no_vote` (answers without a vote), `http`
/// (an error status), `garbage` (a reply that is not a completion), `timeout`, `io` (no
/// answer), else `error`.
fn count_failure(metrics: &Metrics, e: &str) {
    let reason = failure_reason(e);
    metrics
        .judge_failures
        .get_or_create(&Metrics::label("reason", reason))
        .inc();
}

fn failure_reason(e: &str) -> &'static str {
    let e = e.to_ascii_lowercase();
    if e.starts_with(NO_VOTE) {
        "no_vote"
    } else if e.contains("timed out") || e.contains("timeout") || e.starts_with(ABANDONED) {
        "timeout"
    } else if e.contains("http ") {
        "http"
    } else if e.contains("no choices") || e.contains("not json") || e.contains("unreadable") {
        "garbage"
    } else if e.contains("connection") || e.contains("i/o") || e.contains("io error") {
        "io"
    } else {
        "error"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_without_a_vote_are_a_failure_not_a_score() {
        let garbled = Score {
            invalid_votes: 3,
            ..Score::default()
        };
        assert_eq!(vote_given(garbled).unwrap_err(), NO_VOTE);
        let one_vote = Score {
            votes: vec![1.0].into(),
            invalid_votes: 2,
            trainable: true,
            value: 1.0,
            ..Score::default()
        };
        assert_eq!(vote_given(one_vote).unwrap().value, 1.0);
        // No judge asked (a rule, a given reward): nothing to count.
        assert!(vote_given(Score::default()).is_ok());
    }

    #[test]
    fn failures_are_counted_by_their_kind() {
        for (e, want) in [
            ("the judge endpoint gave no vote: HTTP 500: boom", "http"),
            (
                "the judge endpoint gave no vote: the reply has no choices",
                "garbage",
            ),
            (
                "the judge endpoint gave no vote: timeout: global",
                "timeout",
            ),
            ("judge call failed: connection refused", "io"),
            ("the reward plugin panicked", "error"),
            (NO_VOTE, "no_vote"),
        ] {
            assert_eq!(failure_reason(e), want, "{e}");
        }
    }
}
