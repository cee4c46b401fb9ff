//! The generation thread: takes requests from a queue, batches the ones that arrive together,
//! and steps every running batch in turn so a new request starts at once instead of waiting
//! for longer ones. Each batch keeps the weights it started with; a publication in between
//! only affects batches started after it.
//!
//! Admission: at most `max_inflight` requests queued or running; beyond that `submit` says
//! busy (the server answers 429). A request whose receiver is dropped (the client went away)
//! stops receiving tokens; its batch is dropped when nobody listens any more.

use burn::prelude::Backend;
use openclaw_engine::adapters::AdapterStore;
use openclaw_engine::{
    DecodeBatch, Detokenizer, GenerateRequest, Generation, Model, PrefixCache, PrefixCacheOptions,
    Published, StopMatch,
};
use openclaw_metrics::Metrics;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What a request hears back.
#[derive(Clone, Debug, PartialEq)]
pub enum GenEvent {
    /// Generation started on these weights.
    Started {
        /// The weight version every token will come from.
        weight_version: u64,
    },
    /// One sampled token.
    Token {
        /// The token id.
        id: u32,
        /// Its logprob under the distribution it was sampled from.
        logprob: f32,
        /// The stop string or token this token completed (the sequence ends with it).
        stop: Option<StopMatch>,
        /// The most likely tokens at this step with their logprobs, when the request asked.
        top: Vec<(u32, f32)>,
    },
    /// The sequence ended.
    Done(Generation),
    /// The request could not be run.
    Failed(String),
}

/// Settings of the generation thread.
#[derive(Clone, Copy, Debug)]
pub struct SchedulerOptions {
    /// Most sequences started together in one batch.
    pub max_batch: usize,
    /// Most requests queued or running.
    pub max_inflight: usize,
    /// The prompt-prefix cache the thread keeps (a zero budget keeps none).
    pub prefix_cache: PrefixCacheOptions,
}

struct Job {
    request: GenerateRequest,
    events: UnboundedSender<GenEvent>,
}

/// A handle to the generation thread.
#[derive(Clone)]
pub struct Scheduler {
    tx: Sender<Job>,
    inflight: Arc<AtomicUsize>,
    opts: SchedulerOptions,
}

/// The queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

struct Running<B: Backend> {
    batch: DecodeBatch<B>,
    jobs: Vec<RunningJob>,
}

struct RunningJob {
    prompt: Vec<u32>,
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    events: UnboundedSender<GenEvent>,
    done: bool,
    listening: bool,
    /// The version of the weights it samples from: the base's, or its adapter's.
    version: u64,
}

impl Scheduler {
    /// Starts the thread on `weights`.
    pub fn start<B: Backend>(
        weights: Arc<Published<Model<B>>>,
        adapters: Arc<AdapterStore<B>>,
        detokenizer: Arc<dyn Detokenizer>,
        opts: SchedulerOptions,
        metrics: Arc<Metrics>,
    ) -> Scheduler
    where
        Model<B>: Send + Sync,
    {
        let (tx, rx) = channel::<Job>();
        let inflight = Arc::new(AtomicUsize::new(0));
        let count = inflight.clone();
        std::thread::Builder::new()
            .name("generate".into())
            .spawn(move || run(weights, adapters, detokenizer, rx, opts, count, metrics))
            .expect("spawn the generation thread");
        Scheduler { tx, inflight, opts }
    }

    /// Queues every request or none (the choices of one chat request): their slots are taken
    /// together, so a request never starts some of its sequences and is refused the rest.
    pub fn submit_all(
        &self,
        requests: Vec<GenerateRequest>,
    ) -> Result<Vec<UnboundedReceiver<GenEvent>>, Busy> {
        let n = requests.len();
        let now = self.inflight.fetch_add(n, Ordering::SeqCst);
        if now + n > self.opts.max_inflight {
            self.inflight.fetch_sub(n, Ordering::SeqCst);
            return Err(Busy);
        }
        let mut out = Vec::with_capacity(n);
        for (i, request) in requests.into_iter().enumerate() {
            let (events, rx) = unbounded_channel();
            if self.tx.send(Job { request, events }).is_err() {
                // The thread stopped: nothing more runs; the ones sent end with it.
                self.inflight.fetch_sub(n - i, Ordering::SeqCst);
                return Err(Busy);
            }
            out.push(rx);
        }
        Ok(out)
    }

    /// Queues a request; its events arrive on the returned receiver.
    pub fn submit(&self, request: GenerateRequest) -> Result<UnboundedReceiver<GenEvent>, Busy> {
        let mut rx = self.submit_all(vec![request])?;
        Ok(rx.pop().expect("one receiver per request"))
    }

    /// Requests queued or running.
    pub fn inflight(&self) -> usize {
        self.inflight.load(Ordering::SeqCst)
    }

    /// Runs a request to its end, blocking the calling thread (not for async code).
    pub fn generate_blocking(&self, request: GenerateRequest) -> Result<Generation, String> {
        let mut rx = self
            .submit(request)
            .map_err(|_| "the generation queue is full".to_string())?;
        while let Some(ev) = rx.blocking_recv() {
            match ev {
                GenEvent::Done(g) => return Ok(g),
                GenEvent::Failed(e) => return Err(e),
                _ => {}
            }
        }
        Err("the generation thread stopped".into())
    }
}

fn run<B: Backend>(
    weights: Arc<Published<Model<B>>>,
    adapters: Arc<AdapterStore<B>>,
    detok: Arc<dyn Detokenizer>,
    rx: Receiver<Job>,
    opts: SchedulerOptions,
    inflight: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
) {
    let mut running: Vec<Running<B>> = Vec::new();
    // Owned by this thread alone: batches start here, one after another.
    let mut prefixes = PrefixCache::<B>::new(opts.prefix_cache);
    let mut open = true;
    loop {
        let mut jobs = Vec::new();
        if running.is_empty() {
            if !open {
                return;
            }
            match rx.recv() {
                Ok(j) => jobs.push(j),
                Err(_) => return,
            }
        }
        while open && jobs.len() < opts.max_batch.max(1) {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        if !jobs.is_empty() {
            let reused = prefixes.stats().reused_tokens;
            running.extend(start(
                &weights,
                &adapters,
                &detok,
                jobs,
                &inflight,
                &metrics,
                &mut prefixes,
            ));
            let now = prefixes.stats();
            metrics
                .prefix_reused_tokens
                .inc_by(now.reused_tokens - reused);
            metrics.prefix_cache_bytes.set(now.bytes as i64);
        }
        for r in running.iter_mut() {
            step(r, &inflight, &metrics);
        }
        running.retain(|r| !r.batch.is_finished() && r.jobs.iter().any(|j| !j.done && j.listening));
    }
}

fn release(job: &mut RunningJob, inflight: &AtomicUsize) {
    if !job.done {
        job.done = true;
        inflight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts one batch for `jobs`; when the batch cannot start (a bad request among them), each
/// job is tried alone so only the bad one fails.
fn start<B: Backend>(
    weights: &Published<Model<B>>,
    store: &AdapterStore<B>,
    detok: &Arc<dyn Detokenizer>,
    jobs: Vec<Job>,
    inflight: &AtomicUsize,
    metrics: &Metrics,
    prefixes: &mut PrefixCache<B>,
) -> Vec<Running<B>> {
    let current = weights.current();
    // Each request's adapter as the store holds it now (the batch keeps that version); a
    // request whose adapter cannot be had fails alone, before the batch is made.
    let mut kept = Vec::with_capacity(jobs.len());
    let mut adapters = Vec::with_capacity(jobs.len());
    for j in jobs {
        let found = match &j.request.adapter {
            None => Ok(None),
            Some(name) => match store.get(name) {
                Ok(Some(a)) => Ok(Some(a)),
                // One adapter per user: a user with none yet is served by the base.
                Ok(None) if store.base_when_missing() => Ok(None),
                Ok(None) => Err(format!("no adapter is named `{name}`")),
                Err(e) => {
                    // Where it lives is the server's business: the log has it, the client not.
                    tracing::warn!("adapter `{name}` could not be loaded: {e:#}");
                    Err(format!(
                        "adapter `{name}` could not be loaded (the server's log says why)"
                    ))
                }
            },
        };
        match found {
            Ok(a) => {
                kept.push(j);
                adapters.push(a);
            }
            Err(e) => {
                let _ = j.events.send(GenEvent::Failed(e));
                inflight.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
    let jobs = kept;
    if jobs.is_empty() {
        return Vec::new();
    }
    let requests: Vec<GenerateRequest> = jobs.iter().map(|j| j.request.clone()).collect();
    // A row on an adapter samples from that adapter's version; the others from the base's.
    let versions: Vec<Option<u64>> = adapters
        .iter()
        .map(|a| a.as_ref().map(|a| a.version))
        .collect();
    let made = DecodeBatch::with_adapters(
        current.clone(),
        requests,
        adapters,
        Some(detok.clone()),
        Some(prefixes),
    );
    match made {
        Ok(batch) => {
            let base_version = batch.weight_version();
            let jobs = jobs
                .into_iter()
                .zip(versions)
                .map(|(j, adapter_version)| {
                    let version = adapter_version.unwrap_or(base_version);
                    metrics.prompt_tokens.inc_by(j.request.prompt.len() as u64);
                    let listening = j
                        .events
                        .send(GenEvent::Started {
                            weight_version: version,
                        })
                        .is_ok();
                    RunningJob {
                        prompt: j.request.prompt,
                        tokens: Vec::new(),
                        logprobs: Vec::new(),
                        events: j.events,
                        done: false,
                        listening,
                        version,
                    }
                })
                .collect();
            vec![Running { batch, jobs }]
        }
        Err(_) if jobs.len() > 1 => jobs
            .into_iter()
            .flat_map(|j| start(weights, store, detok, vec![j], inflight, metrics, prefixes))
            .collect(),
        Err(e) => {
            for j in jobs {
                let _ = j.events.send(GenEvent::Failed(format!("{e:#}")));
                inflight.fetch_sub(1, Ordering::SeqCst);
            }
            Vec::new()
        }
    }
}

fn step<B: Backend>(r: &mut Running<B>, inflight: &AtomicUsize, metrics: &Metrics) {
    for ev in r.batch.step() {
        let job = &mut r.jobs[ev.index];
        job.tokens.push(ev.token);
        job.logprobs.push(ev.logprob);
        metrics.generated_tokens.inc();
        if job.listening
            && job
                .events
                .send(GenEvent::Token {
                    id: ev.token,
                    logprob: ev.logprob,
                    stop: ev.stop.clone(),
                    top: ev.top,
                })
                .is_err()
        {
            job.listening = false;
        }
        if let Some(finish) = ev.finish {
            let generation = Generation {
                prompt_ids: job.prompt.clone(),
                token_ids: job.tokens.clone(),
                logprobs: job.logprobs.clone(),
                finish_reason: finish,
                stop: ev.stop,
                weight_version: job.version,
            };
            let _ = job.events.send(GenEvent::Done(generation));
            release(job, inflight);
        }
    }
    if r.jobs.iter().all(|j| j.done || !j.listening) {
        for j in r.jobs.iter_mut() {
            release(j, inflight);
        }
    }
}
