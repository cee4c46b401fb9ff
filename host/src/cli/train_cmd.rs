//! `openclaw-host train` (RL on trajectory files) and `openclaw-host sft` (supervised
//! fine-tuning on chat conversations): offline training with the run's optimizer, LoRA,
//! checkpoint and log settings.

use super::flags::RunFlags;
use crate::backend::{OnBackend, Placement};
use crate::config::RunConfig;
use crate::data::trajectory::read_trajectories;
use crate::judge;
use crate::metrics::Metrics;
use crate::plugin::{RewardHandle, RunPlugins};
use crate::policy::{ModelFiles, PolicyEngine, SchedulerOptions};
use crate::training::samples::given_score;
use crate::training::{
    sample_from, train_config, turn_from_record, SessionOptions, TrainSession, TurnTokens,
};
use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_engine::Model;
use openclaw_plugin_api::{HostServices, ScoreRequest, TrainingSample};
use openclaw_train::sft::load_jsonl;
use openclaw_train::{progress_bar, run_sft, SftOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How many passes and how the data is cut, for both commands.
#[derive(clap::Args, Debug, Clone)]
pub struct EpochFlags {
    /// Passes over the data (`--max-steps` stops sooner).
    #[arg(long, default_value_t = 1)]
    pub num_epochs: usize,
}

/// The step to stop at: the end of the data, or `--max-steps` when sooner.
fn stop_at(cfg: &RunConfig, schedule_steps: u64) -> u64 {
    if cfg.max_steps > 0 {
        schedule_steps.min(cfg.max_steps)
    } else {
        schedule_steps
    }
}

fn session_options(cfg: &RunConfig, quiet: bool) -> SessionOptions {
    SessionOptions {
        model_dir: PathBuf::from(&cfg.model_path),
        save_dir: (!cfg.save_dir.is_empty()).then(|| PathBuf::from(&cfg.save_dir)),
        save_interval: cfg.save_interval as u64,
        keep: cfg.keep_checkpoints as usize,
        resume: cfg.resume_from_checkpoint.clone(),
        log_dir: PathBuf::from(&cfg.log_dir),
        quiet,
    }
}

fn require_model(cfg: &RunConfig) -> Result<&Path> {
    if cfg.model_path.is_empty() {
        bail!("no model: set MODEL_PATH or --model-path to a model directory");
    }
    Ok(Path::new(&cfg.model_path))
}

fn require_data(cfg: &RunConfig) -> Result<&Path> {
    if cfg.data_path.is_empty() {
        bail!("no data: give --data-path FILE (or DATA_PATH)");
    }
    Ok(Path::new(&cfg.data_path))
}

/// The run's model (`--model-path`) served by a policy engine with the run's batch limits,
/// for reward plugins that score with the policy (distillation's teacher).
pub(crate) fn policy_engine<B: Backend>(
    cfg: &RunConfig,
    device: &B::Device,
) -> Result<Arc<PolicyEngine<B>>>
where
    Model<B>: Send + Sync,
{
    let files = ModelFiles::<B>::load(&cfg.model_path, &crate::policy::load_options(cfg), device)?;
    Ok(Arc::new(PolicyEngine::start(
        files,
        0,
        SchedulerOptions {
            max_batch: cfg.max_batch_size as usize,
            max_inflight: cfg.max_inflight as usize,
        },
        Arc::new(Metrics::new()),
    )))
}

/// The reward plugin with the host's services: the policy for teacher scoring (the starting
/// model), the run's judge and the log.
fn reward_plugin<B: Backend>(
    run: &RunPlugins,
    cfg: &RunConfig,
    placement: &Placement<B>,
) -> Result<RewardHandle>
where
    Model<B>: Send + Sync,
{
    let engine = policy_engine::<B>(cfg, &placement.serve)?;
    let name = run
        .plugin_for(openclaw_plugin_api::PluginKind::Reward)
        .unwrap_or("reward");
    let host = HostServices::builder()
        .policy(engine)
        .judge(judge::from_config::<B>(cfg, &placement.judge)?)
        .log(crate::plugin::instance::TracingLog::new(name))
        .build();
    run.reward(host)
}

/// The samples of a trajectory file: main, trainable turns, scored by their `reward` field or
/// the reward plugin. Records that cannot be used are reported and skipped.
fn load_samples<B: Backend>(
    run: &RunPlugins,
    cfg: &RunConfig,
    placement: &Placement<B>,
) -> Result<Vec<TrainingSample>>
where
    Model<B>: Send + Sync,
{
    let data = require_data(cfg)?;
    require_model(cfg)?;
    let read = read_trajectories(data)?;
    for e in &read.errors {
        eprintln!("warning: skipped {e}");
    }
    let (tokenizer, template) =
        openclaw_models::tokenizer_and_template(&crate::policy::model_source(cfg)?, None)?;
    let tok = TurnTokens {
        tokenizer: &tokenizer,
        template: &template,
    };
    let needs_judge = read
        .trajectories
        .iter()
        .flat_map(|t| &t.turns)
        .any(|t| t.turn_type == "main" && t.trainable && t.reward.is_none());
    let reward = if needs_judge {
        Some(reward_plugin::<B>(run, cfg, placement).context(
            "some turns have no `reward` field, so the method's reward plugin scores them",
        )?)
    } else {
        None
    };
    let settings = judge::settings(cfg);
    let mut samples = Vec::new();
    let (mut skipped, mut untrainable) = (read.errors.len(), 0usize);
    for (ti, traj) in read.trajectories.iter().enumerate() {
        for (i, rec) in traj.turns.iter().enumerate() {
            if rec.turn_type != "main" || !rec.trainable {
                continue;
            }
            let at = format!(
                "{}: session {:?} turns[{i}]",
                data.display(),
                traj.session_id
            );
            let turn = match turn_from_record(&traj.session_id, i as u32, rec, &tok) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("warning: skipped {at}: {e:#}");
                    skipped += 1;
                    continue;
                }
            };
            let score = match (rec.reward, &reward) {
                (Some(r), _) => given_score(r),
                (None, Some(plugin)) => {
                    let request = ScoreRequest {
                        response_text: turn.response.content.clone(),
                        session_closed: turn.next_state.is_none(),
                        judge: settings.clone(),
                        turn: turn.clone(),
                    };
                    match plugin.score(&request) {
                        Ok(s) => s,
                        Err(e) => {
                            eprintln!("warning: skipped {at}: {e:#}");
                            skipped += 1;
                            continue;
                        }
                    }
                }
                (None, None) => unreachable!("a reward plugin is loaded when a turn needs one"),
            };
            if !score.trainable {
                untrainable += 1;
                continue;
            }
            let group = ((ti as u64) << 20) | i as u64;
            samples.push(sample_from(&turn, &score, group));
        }
    }
    eprintln!(
        "{}: {} training samples; {} records skipped; {} turns judged not trainable",
        data.display(),
        samples.len(),
        skipped,
        untrainable
    );
    Ok(samples)
}

/// The training log with its human lines above the progress bar on a terminal, or one line
/// per step when stderr is a file or a pipe (where the bar is hidden).
fn step_log(cfg: &RunConfig, bar: &indicatif::ProgressBar) -> Result<openclaw_train::TrainLog> {
    let log = openclaw_train::TrainLog::open(Path::new(&cfg.log_dir))?;
    Ok(if bar.is_hidden() {
        log
    } else {
        log.with_progress(bar.clone())
    })
}

/// `openclaw-host train --data-path FILE`.
pub fn train(flags: &RunFlags, epochs: &EpochFlags) -> Result<i32> {
    let run = RunPlugins::load(|| flags.inputs())?;
    let cfg = run.resolved.config.clone();
    require_model(&cfg)?;
    crate::backend::dispatch(
        &cfg,
        TrainOn {
            run: &run,
            epochs: epochs.num_epochs,
        },
    )
}

/// `train` on the backend the configuration places it on.
struct TrainOn<'a> {
    run: &'a RunPlugins,
    epochs: usize,
}

impl OnBackend for TrainOn<'_> {
    type Output = i32;

    fn run<B: Backend>(self, placement: Placement<B>) -> Result<i32>
    where
        Model<B>: Send + Sync,
    {
        train_on::<B>(self.run, self.epochs, &placement)
    }
}

fn train_on<B: Backend>(
    run: &RunPlugins,
    num_epochs: usize,
    placement: &Placement<B>,
) -> Result<i32>
where
    Model<B>: Send + Sync,
{
    let cfg = run.resolved.config.clone();
    let loss = run.loss(HostServices::standalone())?;
    let samples = load_samples::<B>(run, &cfg, placement)?;
    if samples.is_empty() {
        bail!("{}: no trainable samples", cfg.data_path);
    }
    let batch = cfg.rollout_batch_size as usize;
    let per_epoch = samples.len().div_ceil(batch) as u64;
    // The schedule spans the whole data; --max-steps only stops early, so a run cut short
    // and resumed follows the same learning rates as one that runs straight through.
    let schedule_steps = per_epoch * num_epochs as u64;
    let total = stop_at(&cfg, schedule_steps);
    let mut tc = train_config(&cfg, schedule_steps)?;
    tc.use_reference = run.loss_inputs()?.reference_logprobs;
    let mut session = TrainSession::<B>::start(tc, session_options(&cfg, true), &placement.train)?;
    if let Some(from) = &session.resumed_from {
        eprintln!(
            "resumed from {} at step {}",
            from.display(),
            session.trainer.state().step
        );
    }
    let bar = progress_bar(total, "train");
    bar.set_position(session.trainer.state().step.min(total));
    session.log = step_log(&cfg, &bar)?;
    let n = samples.len() as u64;
    // The data position counts samples consumed over all epochs, so a resumed run continues
    // with the next batch in file order.
    while session.trainer.state().step < total {
        let pos = session.trainer.state().data_position;
        let (epoch_pos, offset) = (pos / n, pos % n);
        if epoch_pos >= num_epochs as u64 {
            break;
        }
        let take = (batch as u64).min(n - offset) as usize;
        let mut batch_samples: Vec<TrainingSample> =
            samples[offset as usize..offset as usize + take].to_vec();
        session.rl_step(&mut batch_samples, &loss)?;
        session.trainer.set_data_position(pos + take as u64);
        if let Some(dir) = session.maybe_save(None)? {
            bar.println(format!("saved {}", dir.display()));
        }
    }
    bar.finish_and_clear();
    let log = session.log.path().to_path_buf();
    finish(&mut session, &log)
}

/// `openclaw-host sft --data-path FILE`.
pub fn sft(
    flags: &RunFlags,
    epochs: &EpochFlags,
    batch_size: usize,
    max_len: usize,
) -> Result<i32> {
    let resolved = crate::config::resolve(&flags.inputs(), &Default::default())?;
    let cfg = resolved.config;
    require_model(&cfg)?;
    crate::backend::dispatch(
        &cfg.clone(),
        SftOn {
            cfg,
            epochs: epochs.num_epochs,
            batch_size,
            max_len,
        },
    )
}

/// `sft` on the backend the configuration places it on.
struct SftOn {
    cfg: RunConfig,
    epochs: usize,
    batch_size: usize,
    max_len: usize,
}

impl OnBackend for SftOn {
    type Output = i32;

    fn run<B: Backend>(self, placement: Placement<B>) -> Result<i32>
    where
        Model<B>: Send + Sync,
    {
        sft_on::<B>(
            &self.cfg,
            self.epochs,
            self.batch_size,
            self.max_len,
            &placement,
        )
    }
}

fn sft_on<B: Backend>(
    cfg: &RunConfig,
    num_epochs: usize,
    batch_size: usize,
    max_len: usize,
    placement: &Placement<B>,
) -> Result<i32> {
    let cfg = cfg.clone();
    let data = require_data(&cfg)?;
    let (tokenizer, template) =
        openclaw_models::tokenizer_and_template(&crate::policy::model_source(&cfg)?, None)?;
    let examples = load_jsonl(data, &template, &tokenizer, max_len)?;
    if examples.is_empty() {
        bail!(
            "{}: no conversation with an assistant message",
            data.display()
        );
    }
    let opts = SftOptions {
        epochs: num_epochs,
        batch_size,
        shuffle: true,
    };
    let schedule_steps = opts.total_steps(examples.len());
    let total = stop_at(&cfg, schedule_steps);
    let tc = train_config(&cfg, schedule_steps)?;
    let mut session = TrainSession::<B>::start(tc, session_options(&cfg, true), &placement.train)?;
    let bar = progress_bar(total, "sft");
    bar.set_position(session.trainer.state().step.min(total));
    let mut log = step_log(&cfg, &bar)?;
    eprintln!(
        "{}: {} sequences, {} steps of {} sequences",
        data.display(),
        examples.len(),
        total,
        batch_size
    );
    let checkpoints = &mut session.checkpoints;
    let stop = std::cell::Cell::new(false);
    let result = run_sft(&mut session.trainer, &examples, &opts, |t, report| {
        log.record(report)?;
        if checkpoints.due(t) {
            if let Some(dir) = checkpoints.save(t, None)? {
                bar.println(format!("saved {}", dir.display()));
            }
        }
        if t.state().step >= total {
            stop.set(true);
            bail!(StopEarly);
        }
        Ok(())
    });
    match result {
        Err(e) if stop.get() && e.is::<StopEarly>() => {}
        other => other?,
    }
    bar.finish_and_clear();
    finish(&mut session, log.path())
}

/// The last checkpoint (unless this step is saved already) and the closing line.
fn finish<B: Backend>(session: &mut TrainSession<B>, log: &Path) -> Result<i32> {
    if let Some(dir) = session.save(None)? {
        eprintln!("saved {}", dir.display());
    }
    eprintln!(
        "trained {} steps; log: {}",
        session.trainer.state().step,
        log.display()
    );
    Ok(0)
}

/// Ends [`run_sft`] at `--max-steps`.
#[derive(Debug)]
struct StopEarly;

impl std::fmt::Display for StopEarly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stopped at --max-steps")
    }
}

impl std::error::Error for StopEarly {}
