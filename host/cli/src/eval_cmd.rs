//! `openclaw-host eval`: a model's answers to held-out simulated prompts, with and without a
//! hint, as shares with 95% intervals; with `--eval-tasks "conversation,coding,tool-use"` (or a
//! task file) the original's suites, the model beside its base, and a PNG of the comparison.

use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_config::backend::{OnBackend, Placement};
use openclaw_engine::Model;
use openclaw_episodes::batch::{BatchOptions, EpisodeRecord};
use openclaw_episodes::policy_agent::PolicyAgentOptions;
use openclaw_episodes::setup::{open_env, EnvFiles};
use openclaw_episodes::{Ending, EpisodeOptions};
use openclaw_eval::suites::{EvalTasks, Suite, SuiteReport, SuiteRow, SuiteTasks};
use openclaw_eval::{evaluate_on, Condition, EvalOptions, EvalReport, Share};
use openclaw_lab::report::bars::{draw_bars_png, Bar, Group};
use openclaw_metrics::progress::Progress;
use openclaw_plugin_api::SamplingParams;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The flags of `eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalFlags {
    /// A model directory, a checkpoint, a save directory or its `checkpoint-latest` (the newest
    /// checkpoint), `latest` (in --save-dir), or a GGUF file.
    #[arg(long, env = "MODEL_PATH")]
    pub model_path: PathBuf,
    /// The save directory `latest` refers to.
    #[arg(long, env = "CKPT_SAVE_DIR", default_value = "./checkpoints")]
    pub save_dir: PathBuf,
    /// What to evaluate: a number of held-out prompts (at most 100 of the built-in world,
    /// spread over the task kinds; with --env, its tasks), the original's suites
    /// (`conversation,coding,tool-use`), or a task file (JSON Lines, a `suite` per line).
    #[arg(long, default_value = "100")]
    pub eval_tasks: String,
    /// Suites: held-out tasks per suite (the conversation suite asks --samples-per-prompt
    /// answers to each under each condition).
    #[arg(long, default_value_t = 50)]
    pub tasks_per_suite: usize,
    /// Suites: the model to compare with (default: the base model the checkpoint's
    /// trainer_state.json names; none for a model that is not a checkpoint).
    #[arg(long)]
    pub base_model_path: Option<PathBuf>,
    /// Suites: where the comparison chart goes.
    #[arg(long, default_value = "eval.png")]
    pub png: PathBuf,
    /// Answers sampled per prompt and condition (temperature 1).
    #[arg(long, default_value_t = 2)]
    pub samples_per_prompt: usize,
    /// Seed of the samples: the same seed compares checkpoints on common random numbers.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Most new tokens of an answer (an unfinished answer counts as invalid), or of an agent
    /// turn in an environment (default: 96; 512 for the coding and tool-use suites).
    #[arg(long)]
    pub max_new_tokens: Option<usize>,
    /// Tokenizer files for a checkpoint that has none (default: the checkpoint, then the base
    /// model its trainer_state.json names).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Answers quoted per condition in the JSON report.
    #[arg(long, default_value_t = 2)]
    pub examples: usize,
    /// Print the report as JSON (with per-kind shares and example answers).
    #[arg(long)]
    pub json: bool,
    /// Evaluate on an environment plugin's tasks instead of the built-in world: a crate
    /// directory or library (`envs/toolcall`), or an environment's name under `envs/`
    /// (`toolcall`). Its tasks run as episodes with the model; `--eval-tasks` tasks,
    /// `--samples-per-prompt` episodes each, `--max-new-tokens` per turn.
    #[arg(long, env = "ENV_TYPE")]
    pub env: Option<String>,
    /// The environment's configuration, a TOML file (default: the environment's own).
    #[arg(long, env = "ENV_CONFIG")]
    pub env_config: Option<PathBuf>,
    /// The tools and their limits: a TOML file of `[tools.<name>]` tables added to the
    /// environment's configuration.
    #[arg(long, env = "TOOLS_CONFIG")]
    pub tools_config: Option<PathBuf>,
    /// The SWE environment's instances: a SWE-bench JSONL file or a folder of them (default:
    /// its built-in set).
    #[arg(long, env = "SWE_BENCH_PATH")]
    pub swe_bench_path: Option<PathBuf>,
    /// The GUI environment's browser driver: webdriver (the original's playwright and selenium
    /// are refused).
    #[arg(long, env = "SCREENSHOT_BACKEND")]
    pub screenshot_backend: Option<String>,
    /// Run the episodes on remote environment pools (`env-pool serve`, or the original's
    /// terminal, SWE or GUI workers), comma-separated in failover order, instead of loading the
    /// plugin here.
    #[arg(long, env = "ENV_POOL_URL", value_delimiter = ',')]
    pub env_pool_url: Vec<String>,
    /// How to talk to the pools: auto (this host's protocol where a pool says it speaks it,
    /// else the original's terminal workers'), terminal, swe (the original's SWE pool: /exec,
    /// /diff, /evaluate) or gui (its GUI pool: /step with computer_use actions).
    #[arg(long, env = "ENV_POOL_DIALECT", default_value = "auto")]
    pub env_pool_dialect: String,
    /// The pools' bearer key (their `env-pool serve --api-key`).
    #[arg(
        long,
        env = "ENV_POOL_API_KEY",
        default_value = "",
        hide_env_values = true
    )]
    pub env_pool_api_key: String,
    /// Episodes running at once.
    #[arg(long, env = "PARALLEL_ENVS", default_value_t = 4)]
    pub parallel_envs: usize,
    /// Agent steps per episode before the host cuts it off (it is still scored).
    #[arg(long = "max-episode-steps", env = "MAX_STEPS", default_value_t = 16)]
    pub max_episode_steps: u32,
    /// The environment's split to take tasks from.
    #[arg(long, default_value = "eval")]
    pub split: String,
    /// Seconds one environment call (reset, a step, close) may take; `evaluate` gets ten times
    /// as long.
    #[arg(long, default_value_t = 60)]
    pub env_call_timeout: u64,
    /// Write every episode (conversation, each step's exact tokens and logprobs, outcome) as
    /// JSON Lines to this file.
    #[arg(long)]
    pub episodes_out: Option<PathBuf>,
}

/// The answer budget of the built-in world and of `--env` when none is given.
pub(crate) const DEFAULT_MAX_NEW_TOKENS: usize = 96;

/// The agent turn budget of the coding and tool-use suites when none is given.
const SUITE_MAX_NEW_TOKENS: usize = 512;

/// Runs `eval` on what `--eval-tasks` says: the built-in world or the suites (`--env` with a
/// number is `env_eval_cmd`'s).
pub fn run(flags: &EvalFlags, tasks: EvalTasks) -> Result<i32> {
    match tasks {
        EvalTasks::Count(n) => world(flags, n),
        EvalTasks::Suites(_) | EvalTasks::File(_) if flags.env.is_some() => bail!(
            "--env evaluates one environment on a number of its tasks (--eval-tasks N); the \
             suites run in their own environments: drop --env"
        ),
        EvalTasks::Suites(suites) => run_suites(flags, &SuiteTasks::held_out(suites)),
        EvalTasks::File(path) => run_suites(flags, &SuiteTasks::read(&path)?),
    }
}

/// The built-in world's held-out prompts under `opts` for the model `model_path` names, on
/// the generation device.
fn world_report(model_path: &Path, opts: &EvalOptions) -> Result<EvalReport> {
    struct On<'a>(&'a Path, &'a EvalOptions);
    impl OnBackend for On<'_> {
        type Output = EvalReport;
        fn run<B: Backend>(self, p: Placement<B>) -> Result<Self::Output>
        where
            Model<B>: Send + Sync,
        {
            evaluate_on::<B>(self.0, self.1, &p.serve)
        }
    }
    // Generation goes where ROLLOUT_GPUS says.
    openclaw_config::backend::dispatch_generation(On(model_path, opts))
}

fn world_options(flags: &EvalFlags, eval_tasks: usize) -> EvalOptions {
    EvalOptions {
        eval_tasks,
        samples_per_prompt: flags.samples_per_prompt,
        seed: flags.seed,
        max_new_tokens: flags.max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS),
        tokenizer: flags.tokenizer.clone(),
        save_dir: flags.save_dir.clone(),
        examples: flags.examples,
        ..Default::default()
    }
}

/// `eval` on the built-in world's held-out prompts.
fn world(flags: &EvalFlags, eval_tasks: usize) -> Result<i32> {
    let opts = world_options(flags, eval_tasks);
    let progress = Progress::start(
        &format!(
            "eval: {} prompts x {} conditions x {} answers",
            eval_tasks,
            opts.conditions.len(),
            opts.samples_per_prompt
        ),
        None,
    );
    let report = world_report(&flags.model_path, &opts)?;
    progress.finish("answered");
    if flags.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.model_path);
        print!("{}", report.table());
    }
    Ok(0)
}

/// The base model a checkpoint names (its trainer_state.json), when `model` is one and that
/// model is still there; otherwise why there is none, said on stderr.
fn base_of(model: &Path, save_dir: &Path) -> Option<PathBuf> {
    let named = openclaw_model_store::resolve(&model.to_string_lossy(), save_dir)
        .ok()
        .and_then(|source| openclaw_model_store::checkpoints::base_model_of(source.path()));
    match named {
        None => {
            eprintln!(
                "{} is not a checkpoint that names its starting model: the suites run on it \
                 alone (give --base-model-path to compare)",
                model.display()
            );
            None
        }
        Some(base) if !base.exists() => {
            eprintln!(
                "{} names its starting model {}, which is not there: the suites run on the \
                 model alone (give --base-model-path to compare)",
                model.display(),
                base.display()
            );
            None
        }
        Some(base) => Some(base),
    }
}

/// `eval` on suites: each suite for the model and its base, a table (or JSON) and a PNG.
fn run_suites(flags: &EvalFlags, tasks: &SuiteTasks) -> Result<i32> {
    let base = flags
        .base_model_path
        .clone()
        .or_else(|| base_of(&flags.model_path, &flags.save_dir));
    let mut rows: Vec<SuiteRow> = Vec::new();
    for &suite in &tasks.suites {
        let model = measure(flags, suite, tasks, &flags.model_path);
        let based = base.as_ref().map(|b| measure(flags, suite, tasks, b));
        let (model, model_note) = split(model);
        let (based, base_note) = match based {
            Some(b) => split(b),
            None => (Vec::new(), String::new()),
        };
        let measures: Vec<String> =
            model
                .iter()
                .chain(&based)
                .map(|(m, _, _)| m.clone())
                .fold(Vec::new(), |mut acc, m| {
                    if !acc.contains(&m) {
                        acc.push(m);
                    }
                    acc
                });
        if measures.is_empty() {
            rows.push(SuiteRow {
                suite: suite.name(),
                measure: "-".into(),
                base: None,
                model: None,
                // Both sides usually fail for one reason: say it once.
                note: if model_note == base_note || base_note.is_empty() {
                    model_note
                } else {
                    format!("model: {model_note}; base: {base_note}")
                },
            });
            continue;
        }
        for m in measures {
            let find =
                |side: &[(String, Share, String)]| side.iter().find(|(x, _, _)| *x == m).cloned();
            let (mm, bm) = (find(&model), find(&based));
            let mut notes: Vec<(&str, String)> = Vec::new();
            for (who, side, note) in [("model", &mm, &model_note), ("base", &bm, &base_note)] {
                if let Some((_, _, n)) = side.as_ref().filter(|(_, _, n)| !n.is_empty()) {
                    notes.push((who, n.clone()));
                } else if side.is_none() && !note.is_empty() {
                    notes.push((who, note.clone()));
                }
            }
            // Both sides usually fail for one reason: say it once.
            notes.dedup_by(|a, b| a.1 == b.1);
            let notes: Vec<String> = match notes.as_slice() {
                [(_, only)] => vec![only.clone()],
                _ => notes.iter().map(|(w, n)| format!("{w}: {n}")).collect(),
            };
            rows.push(SuiteRow {
                suite: suite.name(),
                measure: m,
                base: bm.map(|(_, s, _)| s),
                model: mm.map(|(_, s, _)| s),
                note: notes.join("; "),
            });
        }
    }
    let report = SuiteReport {
        model_path: flags.model_path.display().to_string(),
        base_model_path: base.map(|b| b.display().to_string()),
        rows,
    };
    draw_suites(&report, &flags.png)?;
    if flags.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} against {}",
            report.model_path,
            report.base_model_path.as_deref().unwrap_or("no base")
        );
        print!("{}", report.table());
        println!("chart: {}", flags.png.display());
    }
    Ok(0)
}

/// A suite's measures (name, share, note) or why it could not run.
type Measured = Result<Vec<(String, Share, String)>>;

fn split(m: Measured) -> (Vec<(String, Share, String)>, String) {
    match m {
        Ok(rows) => (rows, String::new()),
        Err(e) => (Vec::new(), format!("{e:#}")),
    }
}

/// One suite for the model `model`.
fn measure(flags: &EvalFlags, suite: Suite, tasks: &SuiteTasks, model: &Path) -> Measured {
    match suite {
        Suite::Conversation => {
            let mut opts = world_options(flags, flags.tasks_per_suite);
            if let Some(t) = &tasks.conversation {
                opts.eval_tasks = t.len();
                opts.tasks = Some(t.clone());
            }
            let r = world_report(model, &opts)?;
            let followed = |c: Condition| -> Result<Share> {
                Ok(r.condition(c).context("a condition was not run")?.followed)
            };
            Ok(vec![
                (
                    "preference, no instruction".into(),
                    followed(Condition::None)?,
                    String::new(),
                ),
                (
                    "markdown asked for".into(),
                    followed(Condition::MarkdownHint)?,
                    String::new(),
                ),
                (
                    "plain text asked for".into(),
                    followed(Condition::PlainHint)?,
                    String::new(),
                ),
            ])
        }
        Suite::Coding | Suite::ToolUse => {
            let name = suite.env().expect("an environment suite");
            let env = open_env(name, &EnvFiles::default())
                .with_context(|| format!("the {name} environment cannot start"))?;
            let call = Duration::from_secs(flags.env_call_timeout.max(1));
            let env_tasks = match (suite, &tasks.coding, &tasks.tool_use) {
                (Suite::Coding, Some(names), _) => {
                    let mut all = env.tasks("eval", call)?;
                    all.extend(env.tasks("train", call)?);
                    names
                        .iter()
                        .map(|n| {
                            all.iter()
                                .find(|t| t.id.as_str() == n)
                                .cloned()
                                .with_context(|| {
                                    format!("the {name} environment has no task `{n}`")
                                })
                        })
                        .collect::<Result<Vec<_>>>()?
                }
                (Suite::ToolUse, _, Some(t)) => t.clone(),
                _ => {
                    let mut t = env.tasks("eval", call)?;
                    t.truncate(flags.tasks_per_suite.max(1));
                    t
                }
            };
            let opts = BatchOptions {
                per_task: flags.samples_per_prompt.max(1),
                parallel: flags.parallel_envs.max(1),
                episode: EpisodeOptions::new(flags.max_episode_steps.max(1), call),
                agent: PolicyAgentOptions {
                    sampling: SamplingParams {
                        max_tokens: flags.max_new_tokens.unwrap_or(SUITE_MAX_NEW_TOKENS) as u32,
                        ..SamplingParams::default()
                    },
                    context: 0,
                    min_reply_tokens: 16,
                },
                seed: flags.seed,
            };
            let progress = Progress::start(
                &format!("eval: {} suite, {}", suite.name(), model.display()),
                Some((env_tasks.len() * opts.per_task) as u64),
            );
            let (records, _) = openclaw_episodes::batch::run_with_model(
                &model.to_string_lossy(),
                &load_options(flags),
                &env,
                &env_tasks,
                opts,
                &|_: &EpisodeRecord| progress.advance(1, ""),
            )?;
            progress.finish(&format!("{} episodes", records.len()));
            let solved = records
                .iter()
                .filter(|r| r.episode.outcome.as_ref().and_then(|o| o.solved) == Some(true))
                .count();
            let failures: Vec<&str> = records
                .iter()
                .filter_map(|r| match &r.episode.ending {
                    Ending::Failed(why) => Some(why.as_str()),
                    _ => None,
                })
                .collect();
            // A suite none of whose episodes ran measured nothing: no share, no bar.
            if records.is_empty() {
                bail!("the {name} environment gave no tasks to run");
            }
            if failures.len() == records.len() {
                let all = match records.len() {
                    1 => "its one episode".to_string(),
                    n => format!("all {n} episodes"),
                };
                bail!("{all} failed, so nothing was measured: {}", failures[0]);
            }
            let note = match failures.first() {
                Some(why) => format!(
                    "{} of {} episodes failed: {why}",
                    failures.len(),
                    records.len()
                ),
                None => String::new(),
            };
            Ok(vec![(
                "solved".into(),
                Share::new(solved, records.len()),
                note,
            )])
        }
    }
}

/// The suites' comparison: one group of bars per measure, base and model side by side.
fn draw_suites(report: &SuiteReport, png: &Path) -> Result<()> {
    let bar = |s: &Option<Share>| {
        s.map(|s| Bar {
            value: s.value,
            lo: s.lo,
            hi: s.hi,
        })
    };
    let with_base = report.base_model_path.is_some();
    let series: Vec<String> = if with_base {
        vec!["base".into(), "model".into()]
    } else {
        vec!["model".into()]
    };
    let groups: Vec<Group> = report
        .rows
        .iter()
        .map(|r| Group {
            label: format!("{}: {}", r.suite, r.measure),
            bars: if with_base {
                vec![bar(&r.base), bar(&r.model)]
            } else {
                vec![bar(&r.model)]
            },
        })
        .collect();
    let width = (240 * groups.len() as u32).clamp(480, 2400);
    draw_bars_png("eval: suites", &series, &groups, png, (width, 420))
}

/// How `eval` loads its model: GGUF weights kept in their blocks.
pub(crate) fn load_options(flags: &EvalFlags) -> openclaw_policy::LoadOptions {
    openclaw_policy::LoadOptions {
        save_dir: flags.save_dir.clone(),
        tokenizer: flags.tokenizer.clone(),
        gguf: openclaw_engine::GgufWeights::Blocks,
    }
}
