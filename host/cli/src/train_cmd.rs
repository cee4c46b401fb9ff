//! `openclaw-host train` (RL on trajectory files, through the pipeline's offline mode) and
//! `openclaw-host sft` (supervised fine-tuning on chat conversations): offline training with
//! the run's optimizer, LoRA, checkpoint and log settings.

use super::flags::RunFlags;
use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_config::backend::{OnBackend, Placement};
use openclaw_config::RunConfig;
use openclaw_engine::Model;
use openclaw_pipeline::training::{last_step, session_options, train_config, TrainSession};
use openclaw_pipeline::{DataFile, Dataset, Pipeline};
use openclaw_plugin_api::PluginKind;
use openclaw_plugins::RunPlugins;
use openclaw_trainer::sft::load_jsonl;
use openclaw_trainer::{progress_bar, run_sft, SftOptions};
use std::path::Path;

/// How many passes and how the data is cut, for both commands.
#[derive(clap::Args, Debug, Clone)]
pub struct EpochFlags {
    /// Passes over the data (`--max-steps` stops sooner).
    #[arg(long, default_value_t = 1)]
    pub num_epochs: usize,
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

/// The training log with its human lines above the progress bar on a terminal, or one line
/// per step when stderr is a file or a pipe (where the bar is hidden).
fn step_log(cfg: &RunConfig, bar: &indicatif::ProgressBar) -> Result<openclaw_trainer::TrainLog> {
    let log = openclaw_trainer::TrainLog::open(Path::new(&cfg.log_dir))?;
    Ok(if bar.is_hidden() {
        log
    } else {
        log.with_progress(bar.clone())
    })
}

/// `openclaw-host train --data-path FILE`, or `train` with a rollout or generate plugin.
pub fn train(flags: &RunFlags, epochs: &EpochFlags) -> Result<i32> {
    let run = RunPlugins::load(|| flags.inputs())?;
    let cfg = run.resolved.config.clone();
    require_model(&cfg)?;
    if let Some((kind, p)) = [PluginKind::Rollout, PluginKind::Generate]
        .into_iter()
        .find_map(|k| run.plugin_for(k).map(|p| (k, p.to_string())))
    {
        return train_on_plugin_samples(&run, cfg, epochs, kind, &p);
    }
    openclaw_config::backend::dispatch(
        &cfg,
        TrainOn {
            run: &run,
            epochs: epochs.num_epochs,
        },
    )
}

/// `train` whose samples a rollout or generate plugin makes (slime's `train.py` with a custom
/// rollout or generate function): the plugin needs a policy to sample from, so this is the
/// run's pipeline with its policy served on loopback only (an ephemeral port, no simulated
/// users), training the plugin's samples until `--max-steps`.
fn train_on_plugin_samples(
    run: &RunPlugins,
    mut cfg: RunConfig,
    epochs: &EpochFlags,
    kind: PluginKind,
    plugin: &str,
) -> Result<i32> {
    if epochs.num_epochs != 1 {
        bail!(
            "--num-epochs counts passes over a trajectory file; the {kind} plugin `{plugin}` makes new samples instead: stop with --max-steps"
        );
    }
    if cfg.max_steps == 0 {
        bail!(
            "the {kind} plugin `{plugin}` makes samples without end: give --max-steps (MAX_STEPS is the episode length) to say when `train` stops"
        );
    }
    cfg.host = "127.0.0.1".into();
    cfg.port = 0;
    eprintln!(
        "train: the {kind} plugin `{plugin}` makes the samples with the policy (served on loopback for it only), {} steps",
        cfg.max_steps
    );
    super::run_cmd::run_resolved(run, cfg)
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
    let data = Dataset::load::<B>(run, &cfg, placement)?;
    for problem in &data.skipped {
        eprintln!("warning: skipped {problem}");
    }
    eprintln!(
        "{}: {} training samples; {} records skipped; {} turns judged not trainable",
        cfg.data_path,
        data.samples.len(),
        data.skipped.len(),
        data.untrainable
    );
    let (data_samples, data_skipped) = (data.samples.len(), data.skipped.len());
    let file = DataFile::read(Path::new(&cfg.data_path), data_samples as u64)?;
    let mut pipeline =
        Pipeline::<B>::offline(&cfg, run, placement, data.samples, num_epochs as u64, file)?;
    if let Some(r) = &pipeline.resumed {
        eprintln!("resumed from {} at step {}", r.checkpoint.display(), r.step);
    }
    let total = pipeline.last_step.unwrap_or(0);
    let first = pipeline.resumed.as_ref().map_or(0, |r| r.step);
    let bar = progress_bar(total, "train");
    bar.set_position(pipeline.resumed.as_ref().map_or(0, |r| r.step.min(total)));
    if let Some(log) = pipeline.train_log() {
        *log = step_log(&cfg, &bar)?;
    }
    let on_bar = bar.clone();
    let handle = pipeline.start(move |ev| {
        on_bar.set_position(ev.report.step);
        if let Some(dir) = &ev.saved {
            on_bar.println(format!("saved {}", dir.display()));
        }
    })?;
    handle.wait();
    let summary = handle.shutdown()?.context("training did not run")?;
    bar.finish_and_clear();
    if summary.step <= first && total > first {
        anyhow::bail!(
            "{}: no training step was taken ({} samples, {} records skipped): nothing was trained",
            cfg.data_path,
            data_samples,
            data_skipped
        );
    }
    if let Some(dir) = &summary.checkpoint {
        eprintln!("saved {}", dir.display());
    }
    eprintln!(
        "trained {} steps; log: {}",
        summary.step,
        summary.training_log.display()
    );
    Ok(0)
}

/// `openclaw-host sft --data-path FILE`.
pub fn sft(
    flags: &RunFlags,
    epochs: &EpochFlags,
    batch_size: usize,
    max_len: usize,
) -> Result<i32> {
    let resolved = openclaw_config::resolve(&flags.inputs(), &Default::default())?;
    let cfg = resolved.config;
    require_model(&cfg)?;
    openclaw_config::backend::dispatch(
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
        openclaw_model_store::tokenizer_and_template(&openclaw_policy::model_source(&cfg)?, None)?;
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
    let total = last_step(&cfg, schedule_steps);
    let tc = train_config(&cfg, schedule_steps)?;
    let mut session = TrainSession::<B>::start(tc, session_options(&cfg), &placement.train)?;
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
