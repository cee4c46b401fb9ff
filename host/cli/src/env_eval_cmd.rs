//! `openclaw-host eval --env E`: the model's episodes on an environment plugin's tasks (solve
//! rate, mean reward, tool-call rate, throughput), and optionally every episode with its exact
//! tokens as JSON Lines.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use openclaw_plugin_api::SamplingParams;
use serde_json::json;

use super::eval_cmd::EvalFlags;
use openclaw_episodes::batch::{run_with_model, BatchOptions, EpisodeRecord};
use openclaw_episodes::policy_agent::PolicyAgentOptions;
use openclaw_episodes::setup::{open_env, EnvFiles};
use openclaw_episodes::{Ending, EpisodeOptions};

/// Runs `eval --env` on `eval_tasks` of the environment's tasks.
pub fn run(flags: &EvalFlags, env_spec: &str, eval_tasks: usize) -> Result<i32> {
    if flags.parallel_envs == 0 || flags.max_episode_steps == 0 || flags.samples_per_prompt == 0 {
        bail!("--parallel-envs, --max-episode-steps and --samples-per-prompt must be at least 1");
    }
    // The first line: how the environment's tools reach the model (a template without a tools
    // section gets them in the system prompt), before any episode's tool calls are counted.
    eprintln!(
        "{}",
        openclaw_policy::tools_line(
            &flags.model_path.to_string_lossy(),
            &super::eval_cmd::load_options(flags)
        )?
    );
    let env = open_env(
        env_spec,
        &EnvFiles {
            config: flags.env_config.clone(),
            tools: flags.tools_config.clone(),
            pool_urls: flags.env_pool_url.clone(),
            pool_key: flags.env_pool_api_key.clone(),
            pool_dialect: flags.env_pool_dialect.clone(),
            swe_bench_path: flags.swe_bench_path.clone(),
            screenshot_backend: flags.screenshot_backend.clone(),
        },
    )?;
    let call = Duration::from_secs(flags.env_call_timeout.max(1));
    let mut tasks = env.tasks(&flags.split, call)?;
    if tasks.is_empty() {
        bail!(
            "environment `{}` has no tasks in split `{}`",
            env.plugin(),
            flags.split
        );
    }
    tasks.truncate(eval_tasks.max(1));
    let opts = BatchOptions {
        per_task: flags.samples_per_prompt,
        parallel: flags.parallel_envs,
        episode: EpisodeOptions::new(flags.max_episode_steps, call),
        agent: PolicyAgentOptions {
            sampling: SamplingParams {
                max_tokens: flags
                    .max_new_tokens
                    .unwrap_or(super::eval_cmd::DEFAULT_MAX_NEW_TOKENS)
                    .min(u32::MAX as usize) as u32,
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
    let env_name = env.plugin().to_string();
    let per_task = opts.per_task;
    let on_done = |r: &EpisodeRecord| {
        progress.inc(1);
        if let Some(out) = &out {
            let mut w = out.lock().expect("writer");
            let _ = writeln!(w, "{}", episode_json(&env_name, per_task, r));
        }
    };
    let (records, summary) = run_with_model(
        &flags.model_path.to_string_lossy(),
        &super::eval_cmd::load_options(flags),
        &env,
        &tasks,
        opts,
        &on_done,
    )?;
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
            "solve rate {:.3}  mean reward {:+.3}  tool-call rate {:.3}  answered {:.3}  \
             steps/episode {:.2}  failed {}  {:.1} episodes/min",
            summary.solve_rate,
            summary.mean_reward,
            summary.tool_call_rate,
            summary.answer_rate,
            summary.mean_steps,
            summary.failed,
            summary.episodes_per_minute
        );
        for r in records
            .iter()
            .filter(|r| matches!(r.episode.ending, Ending::Failed(_)))
        {
            if let Ending::Failed(why) = &r.episode.ending {
                println!("failed: {} #{}: {why}", r.episode.task_id, r.job.sample);
            }
        }
    }
    Ok(0)
}

/// One episode as a JSON line: the buffer's episode record (task, conversation, each step's
/// exact tokens, ending, outcome).
fn episode_json(env: &str, per_task: usize, r: &EpisodeRecord) -> String {
    openclaw_buffer::record::disk::episode_to_json(&r.entry(env, per_task as u32)).to_string()
}
