//! The run as a library: [`Pipeline`] is built from the resolved configuration and the plugin
//! set, [`Pipeline::start`] starts its loops and returns a [`PipelineHandle`] to observe and
//! stop them. `run` (the four loops), `serve` (serving alone) and `train` (training alone, on a
//! scored trajectory file) are all this type; the command line only parses, reports and, for
//! the built-in default, starts simulated users.

use super::env_episodes::EpisodeStats;
use super::plugin_samples::PluginFailure;
use super::producer::{Epochs, Producer};
use super::samples::QueuedSample;
use super::serving::{bind, interrupted, serve_on, warn_if_open, Serving};
use super::train_loop::{
    ConsumedState, DataFile, StepEvent, TrainLoop, TrainLoopOptions, TrainSummary,
};
use crate::training::{last_step, session_options, train_config, TrainSession, RUN_STATE_FILE};
use anyhow::{anyhow, bail, Context, Result};
use burn::prelude::Backend;
use openclaw_buffer::Log;
use openclaw_config::backend::Placement;
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_episodes::batch::{run_batch, BatchOptions, BatchSummary};
use openclaw_episodes::TimedEnv;
use openclaw_judge::pool::JudgePool;
use openclaw_judge::stats::JudgeStats;
use openclaw_metrics::Metrics;
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{HostServices, PluginKind, Task, TrainingSample};
use openclaw_plugins::{watch, RunPlugins};
use openclaw_policy::{load_options, ModelFiles};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a resumed run picked up.
#[derive(Clone, Debug)]
pub struct Resumed {
    /// The checkpoint directory.
    pub checkpoint: PathBuf,
    /// Its training step.
    pub step: u64,
    /// The weight version it serves.
    pub weight_version: u64,
    /// Samples up to this sequence number were trained before it.
    pub consumed_through: u64,
}

/// What the buffer held unfinished at start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    /// Recorded samples still to train.
    pub to_train: usize,
    /// Judged turns whose sample was never written.
    pub to_sample: usize,
    /// Turns never judged.
    pub to_judge: usize,
    /// Samples the checkpoint had trained already.
    pub already_trained: usize,
    /// Groups of environment episodes left unfinished (`run --env`).
    pub unfinished_groups: usize,
}

impl ReplayCounts {
    /// Whether anything is left to do.
    pub fn any(&self) -> bool {
        self.to_train + self.to_sample + self.to_judge + self.unfinished_groups > 0
    }
}

/// The loops besides serving: producers, the judge pool, training.
pub(crate) struct Training<B: Backend> {
    pub(crate) train_loop: TrainLoop<B>,
    pub(crate) samples: Receiver<QueuedSample>,
    pub(crate) producers: Vec<Box<dyn Producer>>,
    /// The judge pool the producers feed, closed at shutdown (none for `train`, whose samples
    /// come scored).
    pub(crate) pool: Option<Arc<JudgePool>>,
}

/// A run's loops, built and not yet started.
pub struct Pipeline<B: Backend> {
    pub(crate) cfg: RunConfig,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) serving: Option<Serving<B>>,
    pub(crate) training: Option<Training<B>>,
    /// Where a resumed run picked up.
    pub resumed: Option<Resumed>,
    /// What the buffer held unfinished.
    pub replay: ReplayCounts,
    /// The step training stops at, when it is known before it starts (`--max-steps`, or the
    /// end of `train`'s data).
    pub last_step: Option<u64>,
    /// The environment of `run --env`: its episode counts and held-out evaluation.
    pub env: Option<EnvRun>,
    /// Why a rollout or generate plugin stopped the run, once it has.
    pub plugin_failure: Option<Arc<PluginFailure>>,
    /// What the judges said since the last step (the four loops).
    pub judge_stats: Option<Arc<JudgeStats>>,
}

/// The environment side of `run --env`, for the command's step lines and evaluations.
pub struct EnvRun {
    /// The environment.
    pub env: TimedEnv,
    /// Counts over the finished training episodes.
    pub stats: Arc<EpisodeStats>,
    /// Tasks of the environment's `eval` split (empty: no evaluation).
    pub eval_tasks: Vec<Task>,
    /// The served policy.
    pub policy: Arc<dyn PolicyService>,
    /// How evaluations run (one greedy episode per task).
    pub eval: BatchOptions,
}

impl EnvRun {
    /// One greedy episode of every eval task with the policy's current weights.
    pub fn evaluate(&self) -> BatchSummary {
        run_batch(
            &self.env,
            &self.eval_tasks,
            self.policy.clone(),
            &self.eval,
            &|_| {},
        )
        .1
    }
}

/// The run's metrics, writing TensorBoard event files when `--tensorboard-dir` is set.
pub(crate) fn new_metrics(cfg: &RunConfig) -> Result<Arc<Metrics>> {
    let metrics = Arc::new(Metrics::new());
    if !cfg.tensorboard_dir.is_empty() {
        let file = metrics
            .write_tensorboard(Path::new(&cfg.tensorboard_dir))
            .with_context(|| {
                format!(
                    "cannot write TensorBoard event files in {} (--tensorboard-dir)",
                    cfg.tensorboard_dir
                )
            })?;
        eprintln!("TensorBoard event files: {}", file.display());
    }
    Ok(metrics)
}

/// The consumed state a checkpoint recorded (none before any checkpoint).
pub(crate) fn consumed_state<B: Backend>(session: &TrainSession<B>) -> Result<ConsumedState> {
    Ok(session
        .run_state
        .as_deref()
        .map(serde_json::from_slice)
        .transpose()
        .with_context(|| format!("the checkpoint's {RUN_STATE_FILE} is malformed"))?
        .unwrap_or_default())
}

/// Refuses to resume `train` where the checkpoint's position means nothing for this data: the
/// file changed since the checkpoint (its first samples would be skipped as trained although
/// others were), or every position was already trained.
fn check_resumable(
    cfg: &RunConfig,
    resumed: &Resumed,
    recorded: Option<&DataFile>,
    file: &DataFile,
    epochs: u64,
) -> Result<()> {
    let at = resumed.checkpoint.display();
    let skip = resumed.consumed_through;
    if let Some(was) = recorded.filter(|was| !was.same_contents(file)) {
        if !cfg.allow_changed_data {
            bail!(
                "{}: the data changed since checkpoint {at} was written (it trained on {}: {} \
                 samples, {} bytes; now {} samples, {} bytes), so resuming would skip the first \
                 {skip} samples of different data as trained. Start without \
                 --resume-from-checkpoint, or pass --allow-changed-data to skip them anyway",
                file.path,
                was.path,
                was.samples,
                was.bytes,
                file.samples,
                file.bytes,
            );
        }
        tracing::warn!(
            "{}: the data changed since checkpoint {at}; skipping its first {skip} samples as \
             trained (--allow-changed-data)",
            file.path
        );
    }
    let total = file.samples * epochs;
    if skip >= total {
        bail!(
            "{}: checkpoint {at} already trained all {total} positions ({} samples x {epochs} \
             epochs); nothing is left to train. Raise --num-epochs, or start without \
             --resume-from-checkpoint",
            file.path,
            file.samples,
        );
    }
    Ok(())
}

pub(crate) fn resumed<B: Backend>(
    session: &TrainSession<B>,
    consumed: &ConsumedState,
) -> Option<Resumed> {
    session.resumed_from.as_ref().map(|dir| Resumed {
        checkpoint: dir.clone(),
        step: session.trainer.state().step,
        weight_version: session.trainer.state().weight_version,
        consumed_through: consumed.consumed_through,
    })
}

impl<B: Backend> Pipeline<B>
where
    Model<B>: Send + Sync,
{
    /// Serving alone (`serve`): the OpenAI server recording every main turn to the buffer.
    pub fn serving(cfg: &RunConfig, placement: &Placement<B>) -> Result<Self> {
        let metrics = new_metrics(cfg)?;
        let files = ModelFiles::<B>::load(&cfg.model_path, &load_options(cfg), &placement.serve)?;
        let serving = Serving::build(cfg, files, 0, None, metrics.clone())?;
        Ok(Pipeline {
            cfg: cfg.clone(),
            metrics,
            serving: Some(serving),
            training: None,
            resumed: None,
            replay: ReplayCounts::default(),
            last_step: None,
            env: None,
            plugin_failure: None,
            judge_stats: None,
        })
    }

    /// Training alone (`train`): the samples of one pass over a scored trajectory file
    /// ([`super::Dataset`]), `epochs` passes in file order, in batches of
    /// `--rollout-batch-size` through the loss plugin, until the data ends or `--max-steps`.
    /// Nothing serves and nothing is recorded to the buffer; `--resume-from-checkpoint`
    /// continues after the samples the checkpoint consumed, so a run cut short and resumed ends
    /// with the weights of one that ran straight through. `file` fingerprints the data: a
    /// checkpoint of another file (or of this one before it changed) is refused unless
    /// `allow_changed_data`, since the samples it skips as trained are not the ones it trained.
    pub fn offline(
        cfg: &RunConfig,
        plugins: &RunPlugins,
        placement: &Placement<B>,
        samples: Vec<TrainingSample>,
        epochs: u64,
        file: DataFile,
    ) -> Result<Self> {
        if samples.is_empty() {
            bail!("{}: no trainable samples", cfg.data_path);
        }
        for kind in [PluginKind::Rollout, PluginKind::Generate] {
            if let Some(p) = plugins.plugin_for(kind) {
                bail!(
                    "plugin `{p}` provides kind `{kind}`, but `train` trains on a scored trajectory \
                     file and has no policy to generate with; run it with `run` (which serves and \
                     trains)"
                );
            }
        }
        let metrics = new_metrics(cfg)?;
        let loss = plugins.loss(HostServices::standalone())?;
        let batch = (cfg.rollout_batch_size as usize).max(1);
        let schedule_steps = (samples.len() as u64 * epochs).div_ceil(batch as u64);
        let last_step = last_step(cfg, schedule_steps);
        let mut tc = train_config(cfg, schedule_steps)?;
        tc.use_reference = plugins.loss_inputs()?.reference_logprobs;
        let lock = crate::training::plugin_lock::of_run(cfg, plugins)?;
        let session = TrainSession::<B>::start(
            tc,
            crate::training::SessionOptions {
                extras: vec![crate::training::plugin_lock::extra_file(&lock)],
                ..session_options(cfg)
            },
            &placement.train,
        )?;
        if let Some(dir) = &session.resumed_from {
            crate::training::plugin_lock::warn_of_changes(dir, &lock);
        }
        // Checkpoints of `train` record how many samples were consumed both ways; the data
        // position alone is what older ones have.
        let recorded = consumed_state(&session)?;
        let consumed = ConsumedState {
            consumed_through: recorded
                .consumed_through
                .max(session.trainer.state().data_position),
            data: Some(file.clone()),
            adapters: Default::default(),
        };
        let resumed = resumed(&session, &consumed);
        if let Some(r) = &resumed {
            check_resumable(cfg, r, recorded.data.as_ref(), &file, epochs)?;
        }
        let (to_train, rx) = sync_channel(batch * 4);
        let producers: Vec<Box<dyn Producer>> = vec![Box::new(Epochs {
            samples,
            epochs,
            start_after: consumed.consumed_through,
            to_train,
        })];
        let train_loop = TrainLoop {
            users: None,
            session,
            loss,
            weights: None,
            serve_device: placement.serve.clone(),
            opts: TrainLoopOptions {
                batch,
                // Samples come as fast as they are taken: batches are always whole (the last
                // may be short), so a resumed run sees the same batches as a straight one.
                batch_timeout: Duration::MAX,
                // File samples were scored as given, whatever weights sampled them.
                max_staleness: u64::MAX,
                correct_stale: false,
                update_interval: 1,
                max_steps: last_step,
                max_failed_steps: cfg.max_failed_steps,
            },
            metrics: metrics.clone(),
            consumed,
        };
        Ok(Pipeline {
            cfg: cfg.clone(),
            metrics,
            serving: None,
            training: Some(Training {
                train_loop,
                samples: rx,
                producers,
                pool: None,
            }),
            resumed,
            replay: ReplayCounts::default(),
            last_step: Some(last_step),
            env: None,
            plugin_failure: None,
            judge_stats: None,
        })
    }

    /// The run's metrics (a step callback records its own numbers there, for the dashboard
    /// and TensorBoard).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The training log, to show its lines above a progress bar (none when nothing trains).
    pub fn train_log(&mut self) -> Option<&mut openclaw_trainer::TrainLog> {
        self.training
            .as_mut()
            .map(|t| &mut t.train_loop.session.log)
    }

    /// Starts every loop and listens on the configured address; `on_step` runs on the training
    /// thread after each step. Returns once the server listens.
    pub fn start(self, on_step: impl FnMut(&StepEvent) + Send + 'static) -> Result<PipelineHandle> {
        // Listen first: a port in use fails here, before any thread starts.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = match &self.serving {
            Some(_) => {
                warn_if_open(&self.cfg.host, &self.cfg.api_key);
                Some(rt.block_on(bind(&self.cfg.host, self.cfg.port))?)
            }
            None => None,
        };
        let addr = listener.as_ref().map(|l| l.local_addr()).transpose()?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut producers = Vec::new();
        let mut trainer = None;
        let mut pool = None;
        if let Some(t) = self.training {
            for p in t.producers {
                let stop = stop.clone();
                producers.push(std::thread::Builder::new().name(p.name().into()).spawn(
                    move || {
                        // A producer that fails leaves nothing to train: the run stops.
                        let r = p.run(stop.clone());
                        if r.is_err() {
                            stop.store(true, Ordering::SeqCst);
                        }
                        r
                    },
                )?);
            }
            pool = t.pool;
            let train_stop = stop.clone();
            let (train_loop, rx) = (t.train_loop, t.samples);
            trainer = Some(
                std::thread::Builder::new()
                    .name("train".into())
                    .spawn(move || train_loop.run(rx, train_stop, on_step))?,
            );
        }
        let limits = Limits {
            started: Instant::now(),
            plugin_timeout: Duration::from_secs(self.cfg.plugin_timeout.max(1)),
            grace: Duration::from_secs(self.cfg.shutdown_grace.max(1)),
            unwritable_timeout: (self.cfg.buffer_unwritable_timeout > 0)
                .then(|| Duration::from_secs(self.cfg.buffer_unwritable_timeout)),
            log: self.serving.as_ref().map(|s| s.log()),
            save_dir: PathBuf::from(&self.cfg.save_dir),
        };
        let watch = stop.clone();
        // One signal listener for the whole run, so no signal falls between two polls; it
        // ends on Ctrl-C or SIGTERM, or once the loops are asked to stop.
        let until_stopped = async move {
            let signal = interrupted();
            tokio::pin!(signal);
            loop {
                tokio::select! {
                    _ = &mut signal => {
                        // `wait` returns now and the stop is bounded by --shutdown-grace, not
                        // by the server's drain (which a slow client could hold).
                        watch.store(true, Ordering::SeqCst);
                        break;
                    }
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {
                        if watch.load(Ordering::SeqCst) {
                            break;
                        }
                    }
                }
            }
        };
        {
            let _in_runtime = rt.enter();
            openclaw_server::dashboard::spawn_ticker(self.metrics.clone());
        }
        let mut dashboard = addr.map(|a| format!("http://{a}{}", openclaw_server::dashboard::PATH));
        let server = match (listener, self.serving) {
            (Some(listener), Some(serving)) => {
                rt.spawn(serve_on(listener, serving.app.clone(), until_stopped))
            }
            // Nothing serves the API (`train`): the dashboard alone, on a free loopback port;
            // the signal ends the run (`wait` sees this task end).
            _ => {
                let listener = rt.block_on(bind("127.0.0.1", 0))?;
                let url = format!(
                    "http://{}{}",
                    listener.local_addr()?,
                    openclaw_server::dashboard::PATH
                );
                eprintln!("dashboard: {url}");
                dashboard = Some(url);
                let router = openclaw_server::dashboard::router(self.metrics.clone(), None);
                rt.spawn(async move {
                    axum::serve(listener, router)
                        .with_graceful_shutdown(until_stopped)
                        .await
                        .context("the dashboard server failed")
                })
            }
        };
        Ok(PipelineHandle {
            addr,
            dashboard,
            metrics: self.metrics,
            stop,
            limits,
            failure: Mutex::new(None),
            rt: Some(rt),
            server: Some(server),
            trainer,
            producers,
            pool,
        })
    }
}

/// The bounds a started pipeline keeps.
struct Limits {
    /// When the pipeline started: calls an earlier one left behind are not its own.
    started: Instant,
    /// How long a loss, rollout or generate call may take (`--plugin-timeout`).
    plugin_timeout: Duration,
    /// How long a stop waits for the loops (`--shutdown-grace`).
    grace: Duration,
    /// How long the buffer may fail to write before the run stops (`--buffer-unwritable-timeout`).
    unwritable_timeout: Option<Duration>,
    /// The buffer serving writes.
    log: Option<Arc<Log>>,
    /// Where checkpoints go, to say what a stop left saved.
    save_dir: PathBuf,
}

impl Limits {
    /// Why the run must stop now, if it must.
    fn breached(&self) -> Option<String> {
        let kinds = [PluginKind::Loss, PluginKind::Rollout, PluginKind::Generate];
        if let Some(call) = watch::overdue(&kinds, self.started, self.plugin_timeout) {
            return Some(format!(
                "{call}, past --plugin-timeout ({} s)",
                self.plugin_timeout.as_secs()
            ));
        }
        let (limit, log) = (self.unwritable_timeout?, self.log.as_ref()?);
        let (since, why) = log.unwritable()?;
        (since >= limit).then(|| {
            format!(
                "the buffer has not been able to record for {:.0} s (--buffer-unwritable-timeout {} s): {why}",
                since.as_secs_f64(),
                limit.as_secs()
            )
        })
    }
}

/// A started pipeline.
pub struct PipelineHandle {
    addr: Option<SocketAddr>,
    /// The live dashboard's page.
    dashboard: Option<String>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    limits: Limits,
    /// Why the run was stopped by a breached limit.
    failure: Mutex<Option<String>>,
    /// Taken by `shutdown`, which ends it without waiting on a hung task.
    rt: Option<tokio::runtime::Runtime>,
    server: Option<tokio::task::JoinHandle<Result<()>>>,
    trainer: Option<JoinHandle<Result<TrainSummary>>>,
    producers: Vec<JoinHandle<Result<()>>>,
    pool: Option<Arc<JudgePool>>,
}

impl PipelineHandle {
    /// The address the server listens on (none when nothing serves: `train`).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The OpenAI base URL clients use (`http://ADDR/v1`), when something serves.
    pub fn base_url(&self) -> Option<String> {
        self.addr.map(|a| format!("http://{a}/v1"))
    }

    /// The live dashboard's URL (on the API's address, or on its own loopback port when
    /// nothing serves the API).
    pub fn dashboard_url(&self) -> Option<&str> {
        self.dashboard.as_deref()
    }

    /// The run's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether the loops were asked to stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Asks every loop to stop (the server drains its requests; training saves a checkpoint).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Blocks until the run is over: training reached `--max-steps` or failed, the server
    /// stopped (Ctrl-C or SIGTERM), [`PipelineHandle::stop`] was called, or a limit was
    /// breached (a plugin call past `--plugin-timeout`, a buffer unable to write for
    /// `--buffer-unwritable-timeout`), which [`PipelineHandle::shutdown`] then reports.
    pub fn wait(&self) {
        loop {
            let trainer_done = self.trainer.as_ref().is_some_and(|t| t.is_finished());
            let server_done = self.server.as_ref().is_none_or(|s| s.is_finished());
            if trainer_done || server_done || self.stopping() {
                self.stop();
                return;
            }
            if let Some(why) = self.limits.breached() {
                tracing::error!("stopping: {why}");
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                self.stop();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What a stop that left training mid-step did not save: the step it was in and the
    /// newest whole checkpoint, which stays.
    fn unsaved(&self) -> String {
        let taken = self.metrics.train_steps.get();
        let kept = openclaw_model_store::checkpoints::latest_checkpoint(&self.limits.save_dir)
            .ok()
            .map(|c| c.display().to_string());
        format!(
            " without a final checkpoint: training was in a step after the {taken} it took in this run; {}",
            match kept {
                Some(c) => format!(
                    "the newest whole checkpoint, {c}, stays, and what was trained after it is trained again from the buffer at the next start"
                ),
                None => "no checkpoint was written yet: the next start trains from the beginning of the buffer".into(),
            }
        )
    }

    /// Stops every loop and waits for them, at most `--shutdown-grace` in all: training saves
    /// its final checkpoint, the server drains, producers end, the judge workers finish their
    /// calls. What has not ended by then (a plugin call that hangs) is left behind with an
    /// error naming it, so the process can exit. Returns how training ended (none for serving
    /// alone); a training error, or the limit that stopped the run, is returned after
    /// everything has stopped.
    pub fn shutdown(mut self) -> Result<Option<TrainSummary>> {
        self.stop();
        let deadline = Instant::now() + self.limits.grace;
        let grace = self.limits.grace.as_secs();
        let mut stuck: Vec<String> = Vec::new();
        let trained = self.trainer.take().and_then(|t| {
            if join_by(&t, deadline) {
                Some(
                    t.join()
                        .map_err(|_| anyhow!("training panicked"))
                        .and_then(|r| r),
                )
            } else {
                stuck.push("training".into());
                None
            }
        });
        let rt = self.rt.take().expect("the runtime is taken once");
        let served = self.server.take().and_then(|server| {
            let left = deadline.saturating_duration_since(Instant::now());
            match rt.block_on(async { tokio::time::timeout(left, server).await }) {
                Ok(r) => Some(
                    r.map_err(|e| anyhow!("the server task failed: {e}"))
                        .and_then(|r| r),
                ),
                Err(_) => {
                    stuck.push("the server's requests in flight".into());
                    None
                }
            }
        });
        for p in self.producers.drain(..) {
            let name = p.thread().name().unwrap_or("producer").to_string();
            if !join_by(&p, deadline) {
                stuck.push(name);
                continue;
            }
            match p.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("{name} stopped: {e:#}"),
                Err(_) => tracing::error!("{name} panicked"),
            }
        }
        // The producers are gone, so this handle holds the pool's last reference: closing it
        // lets the judge workers finish and stop before the buffer is left to a next run.
        if let Some(pool) = self.pool.take() {
            match Arc::try_unwrap(pool) {
                Ok(pool) => {
                    let closing = std::thread::spawn(move || pool.close());
                    if !join_by(&closing, deadline) {
                        stuck.push("the judge workers".into());
                    }
                }
                Err(_) => tracing::warn!("the judge pool is still shared; its workers end with it"),
            }
        }
        // Tasks still running (a request whose client never reads) are not waited for.
        rt.shutdown_timeout(Duration::from_millis(100));
        let failure = self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if !stuck.is_empty() {
            let calls: Vec<String> = watch::in_flight().iter().map(|c| c.to_string()).collect();
            let why = format!(
                "{} did not stop within --shutdown-grace ({grace} s){}; left behind{}",
                stuck.join(", "),
                if calls.is_empty() {
                    String::new()
                } else {
                    format!(": {}", calls.join("; "))
                },
                if stuck.iter().any(|s| s == "training") {
                    self.unsaved()
                } else {
                    String::new()
                }
            );
            tracing::error!("{why}");
            return Err(match failure {
                Some(f) => anyhow!("the run stopped: {f}; {why}"),
                None => anyhow!("{why}"),
            });
        }
        if let Some(f) = failure {
            return Err(anyhow!("the run stopped: {f}"));
        }
        if let Some(r) = served {
            r?;
        }
        trained.transpose()
    }
}

impl Drop for PipelineHandle {
    /// A handle dropped without [`PipelineHandle::shutdown`] still stops the loops.
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until the thread has finished or `deadline` has passed; whether it finished.
fn join_by<T>(t: &JoinHandle<T>, deadline: Instant) -> bool {
    while !t.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// The pools of `--env-pool-url`: comma-separated, blanks dropped.
pub(crate) fn pool_urls(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(str::to_string)
        .collect()
}
