//! `openclaw-host eval --env E`: the model's episodes on an environment plugin's tasks (solve
//! rate, mean reward, tool-call rate, throughput), and optionally every episode with its exact
//! tokens as JSON Lines.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use burn::prelude::Backend;
use openclaw_engine::Model;
use openclaw_plugin_api::host::PolicyService;
use openclaw_plugin_api::{HostServices, SamplingParams};
use serde_json::json;

use super::eval_cmd::EvalFlags;
use crate::backend::{OnBackend, Placement};
use crate::episodes::batch::{run_batch, BatchOptions, BatchSummary, EpisodeRecord};
use crate::episodes::policy_agent::PolicyAgentOptions;
use crate::episodes::{Ending, EpisodeOptions, TimedEnv};
use crate::metrics::Metrics;
use crate::plugin::instance::TracingLog;
use crate::plugin::{EnvHandle, LoadedPlugin};
use crate::policy::{scheduler_options, LoadOptions, ModelFiles, PolicyEngine};

/// A crate directory, a library, or a name under `envs/`.
fn env_location(spec: &str) -> Result<PathBuf> {
    let p = PathBuf::from(spec);
    if p.exists() {
        return Ok(p);
    }
    let named = Path::new("envs").join(spec);
    if !spec.contains('/') && named.join("plugin.toml").is_file() {
        return Ok(named);
    }
    bail!("environment `{spec}`: no such crate directory or library, and no envs/{spec}/plugin.toml here")
}

/// Runs `eval --env`.
pub fn run(flags: &EvalFlags, env_spec: &str) -> Result<i32> {
    if flags.parallel_envs == 0 || flags.max_episode_steps == 0 || flags.samples_per_prompt == 0 {
        bail!("--parallel-envs, --max-episode-steps and --samples-per-prompt must be at least 1");
    }
    let plugin = LoadedPlugin::open(&env_location(env_spec)?)?;
    let config = match &flags.env_config {
        Some(p) => std::fs::read_to_string(p)
            .with_context(|| format!("reading --env-config {}", p.display()))?,
        None => plugin.manifest.default_config.to_string(),
    };
    let host = HostServices::builder()
        .log(TracingLog::new(plugin.name()))
        .build();
    let env = TimedEnv::new(EnvHandle::new(&plugin, &config, host)?);
    let call = Duration::from_secs(flags.env_call_timeout.max(1));
    let mut tasks = env.tasks(&flags.split, call)?;
    if tasks.is_empty() {
        bail!(
            "environment `{}` has no tasks in split `{}`",
            env.plugin(),
            flags.split
        );
    }
    tasks.truncate(flags.eval_tasks.max(1));
    let opts = BatchOptions {
        per_task: flags.samples_per_prompt,
        parallel: flags.parallel_envs,
        episode: EpisodeOptions {
            max_steps: flags.max_episode_steps,
            call_timeout: call,
            evaluate_timeout: call.saturating_mul(10),
        },
        agent: PolicyAgentOptions {
            sampling: SamplingParams {
                max_tokens: flags.max_new_tokens.min(u32::MAX as usize) as u32,
                ..SamplingParams::default()
            },
            context: 0, // set from the model below
            min_reply_tokens: 16,
        },
        seed: flags.seed,
    };
    let out = match &flags.episodes_out {
        Some(p) => Some(Mutex::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        ))),
        None => None,
    };
    let progress = indicatif::ProgressBar::new((tasks.len() * opts.per_task) as u64);
    progress.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} episodes {msg} ({eta})")
            .expect("a valid template"),
    );
    let on_done = |r: &EpisodeRecord| {
        progress.inc(1);
        if let Some(out) = &out {
            let mut w = out.lock().expect("writer");
            let _ = writeln!(w, "{}", episode_json(r));
        }
    };
    struct On<'a> {
        flags: &'a EvalFlags,
        env: &'a TimedEnv,
        tasks: &'a [openclaw_plugin_api::Task],
        opts: BatchOptions,
        on_done: &'a (dyn Fn(&EpisodeRecord) + Sync),
    }
    impl OnBackend for On<'_> {
        type Output = (Vec<EpisodeRecord>, BatchSummary);
        fn run<B: Backend>(mut self, p: Placement<B>) -> Result<Self::Output>
        where
            Model<B>: Send + Sync,
        {
            let load = LoadOptions {
                save_dir: self.flags.save_dir.clone(),
                tokenizer: self.flags.tokenizer.clone(),
            };
            let spec = self.flags.model_path.to_string_lossy().into_owned();
            let files = ModelFiles::<B>::load(&spec, &load, &p.serve)?;
            let engine = PolicyEngine::start(
                files,
                0,
                // The run's defaults (batch size, in-flight limit, prefix cache).
                scheduler_options(&crate::config::RunConfig::defaults()),
                Arc::new(Metrics::new()),
            );
            self.opts.agent.context = engine.context();
            let policy: Arc<dyn PolicyService> = Arc::new(engine);
            Ok(run_batch(
                self.env,
                self.tasks,
                policy,
                &self.opts,
                self.on_done,
            ))
        }
    }
    let (records, summary) = crate::backend::dispatch_generation(On {
        flags,
        env: &env,
        tasks: &tasks,
        opts,
        on_done: &on_done,
    })?;
    progress.finish_and_clear();
    if let Some(out) = out {
        out.into_inner()
            .map_err(|_| anyhow!("episode writer"))?
            .flush()?;
    }
    if flags.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"env": env.plugin(), "summary": summary}))?
        );
    } else {
        println!(
            "{} on environment `{}` ({} tasks of `{}`, {} episodes each, {} at once)",
            flags.model_path.display(),
            env.plugin(),
            tasks.len(),
            flags.split,
            flags.samples_per_prompt,
            flags.parallel_envs
        );
        println!(
            "solve rate {:.3}  mean reward {:+.3}  tool-call rate {:.3}  steps/episode {:.2}  \
             failed {}  {:.1} episodes/min",
            summary.solve_rate,
            summary.mean_reward,
            summary.tool_call_rate,
            summary.mean_steps,
            summary.failed,
            summary.episodes_per_minute
        );
        for r in records
            .iter()
            .filter(|r| matches!(r.episode.ending, Ending::Failed(_)))
        {
            if let Ending::Failed(why) = &r.episode.ending {
                println!("failed: {} #{}: {why}", r.episode.task_id, r.sample);
            }
        }
    }
    Ok(0)
}

/// One episode as a JSON line: its ending, outcome, conversation, and each step's tokens.
fn episode_json(r: &EpisodeRecord) -> String {
    let ep = &r.episode;
    let (ending, reason) = match &ep.ending {
        Ending::Done => ("done", None),
        Ending::Truncated => ("truncated", None),
        Ending::MaxSteps => ("max_steps", None),
        Ending::ContextFull => ("context_full", None),
        Ending::Failed(why) => ("failed", Some(why.as_str())),
    };
    json!({
        "task_id": ep.task_id,
        "sample": r.sample,
        "ending": ending,
        "failure": reason,
        "outcome": ep.outcome.as_ref().map(|o| json!({
            "reward": o.reward,
            "solved": o.solved,
            "evaluated": o.evaluated,
            "details": serde_json::from_str::<serde_json::Value>(&o.details_json).unwrap_or_default(),
        })),
        "step_rewards": ep.step_rewards,
        "conversation": ep.conversation,
        "steps": r.steps.iter().map(|g| json!({
            "prompt_ids": g.prompt_ids.as_slice(),
            "response_ids": g.response_ids.as_slice(),
            "logprobs": g.logprobs.as_slice(),
            "finish_reason": g.finish_reason.as_str(),
            "weight_version": g.weight_version,
        })).collect::<Vec<_>>(),
    })
    .to_string()
}
