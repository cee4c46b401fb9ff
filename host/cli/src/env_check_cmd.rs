//! `env check`: a task set a user can trust. Every task's reference solution must solve it and
//! doing nothing must not; tasks the environment could not load are listed; one broken task is
//! reported and the rest still checked.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use openclaw_episodes::setup::{open_env, read_tasks, EnvFiles};
use openclaw_episodes::TimedEnv;
use openclaw_plugin_api::{Evaluation, Task};

/// Flags of `env check`.
#[derive(clap::Args, Debug)]
pub struct CheckFlags {
    /// The environment: a name under envs/ (`toolcall`, `terminal`, `swe`), a crate directory or
    /// a library.
    pub env: String,
    /// Check the tasks of this task file (JSONL) instead of the environment's own split.
    #[arg(long)]
    pub data_path: Option<PathBuf>,
    /// The environment's split to check (`all`, `train`, `test`).
    #[arg(long, default_value = "all")]
    pub split: String,
    /// The environment's configuration file (TOML); the plugin's default when not given.
    #[arg(long, env = "ENV_CONFIG")]
    pub env_config: Option<PathBuf>,
    /// The tools and their limits: a TOML file of [tools.<name>] tables.
    #[arg(long, env = "TOOLS_CONFIG")]
    pub tools_config: Option<PathBuf>,
    /// The SWE environment's instances: a SWE-bench JSONL file or a folder of them.
    #[arg(long, env = "SWE_BENCH_PATH")]
    pub swe_bench_path: Option<PathBuf>,
    /// The GUI environment's browser driver: webdriver (the original's playwright and selenium
    /// are refused).
    #[arg(long, env = "SCREENSHOT_BACKEND")]
    pub screenshot_backend: Option<String>,
    /// Only the tasks whose id contains this text.
    #[arg(long)]
    pub only: Option<String>,
    /// Seconds each call to the environment may take.
    #[arg(long, default_value_t = 120)]
    pub call_timeout: u64,
}

/// One episode's outcome: the score, or why there is none.
enum Outcome {
    Scored(Evaluation),
    Failed(String),
    NoReference,
}

impl Outcome {
    fn cell(&self) -> String {
        match self {
            Outcome::Scored(e) => {
                format!("{:.2}{}", e.reward, if e.solved { " solved" } else { "" })
            }
            Outcome::Failed(_) => "error".into(),
            Outcome::NoReference => "none".into(),
        }
    }
}

/// Runs `actions` (none: no action at all) from a reset of `task` and scores the episode.
fn episode(
    env: &TimedEnv,
    task: &Task,
    actions: &[openclaw_plugin_api::Action],
    call: Duration,
) -> Outcome {
    let (id, _) = match env.reset(task, 0, call) {
        Ok(r) => r,
        Err(e) => return Outcome::Failed(format!("reset: {e:#}")),
    };
    let mut failed = None;
    for (n, a) in actions.iter().enumerate() {
        match env.step(id, a, call) {
            Ok(out) if out.done => break,
            Ok(_) => {}
            Err(e) => {
                failed = Some(format!("step {}: {e:#}", n + 1));
                break;
            }
        }
    }
    let scored = match failed {
        Some(why) => Outcome::Failed(why),
        None => match env.evaluate(id, call) {
            Ok(Some(e)) => Outcome::Scored(e),
            Ok(None) => Outcome::Failed("the environment does not evaluate episodes".into()),
            Err(e) => Outcome::Failed(format!("evaluate: {e:#}")),
        },
    };
    if let Err(e) = env.close(id, call) {
        tracing::warn!("closing episode {id} of task {}: {e:#}", task.id);
    }
    scored
}

/// Runs `env check`; the exit code is 1 when any task failed its check or could not load.
pub fn run(flags: &CheckFlags) -> Result<i32> {
    let call = Duration::from_secs(flags.call_timeout.max(1));
    let env = open_env(
        &flags.env,
        &EnvFiles {
            config: flags.env_config.clone(),
            tools: flags.tools_config.clone(),
            swe_bench_path: flags.swe_bench_path.clone(),
            screenshot_backend: flags.screenshot_backend.clone(),
            ..EnvFiles::default()
        },
    )?;
    let mut tasks = match &flags.data_path {
        Some(p) => read_tasks(p)?,
        None => env.tasks(&flags.split, call)?,
    };
    if let Some(only) = &flags.only {
        tasks.retain(|t| t.id.contains(only.as_str()));
    }
    let problems = env.problems();
    if tasks.is_empty() && problems.is_empty() {
        bail!("environment `{}` has no task to check", env.plugin());
    }
    let width = tasks
        .iter()
        .map(|t| t.id.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 48);
    println!(
        "env check {}: {} tasks{}, {} not loaded",
        env.plugin(),
        tasks.len(),
        match &flags.data_path {
            Some(p) => format!(" from {}", p.display()),
            None => format!(" (split {})", flags.split),
        },
        problems.len()
    );
    println!(
        "{:<width$}  {:<12}  {:<12}  {:<10}  {:>7}",
        "task", "reference", "no action", "verdict", "seconds"
    );
    let (mut ok, mut bad, mut unchecked) = (0usize, Vec::new(), 0usize);
    for task in &tasks {
        let started = Instant::now();
        let reference = match env.reference(task) {
            Ok(Some(actions)) => episode(&env, task, &actions, call),
            Ok(None) => Outcome::NoReference,
            Err(e) => Outcome::Failed(format!("reference: {e:#}")),
        };
        let nothing = episode(&env, task, &[], call);
        let verdict = match (&reference, &nothing) {
            (_, Outcome::Failed(why)) | (Outcome::Failed(why), _) => Err(why.clone()),
            (Outcome::NoReference, Outcome::Scored(n)) if n.solved => {
                Err("solved with no action".into())
            }
            (Outcome::NoReference, _) => Ok(false),
            (Outcome::Scored(r), Outcome::Scored(n)) => {
                if !r.solved {
                    Err(format!(
                        "the reference did not solve it: {}",
                        r.details_json
                    ))
                } else if n.solved || n.reward >= r.reward {
                    Err(format!(
                        "no action scored {:.2} (solved: {}): the task does not tell solved from untouched",
                        n.reward, n.solved
                    ))
                } else {
                    Ok(true)
                }
            }
            (_, Outcome::NoReference) => unreachable!("no action always runs"),
        };
        let word = match &verdict {
            Ok(true) => {
                ok += 1;
                "ok"
            }
            Ok(false) => {
                unchecked += 1;
                "unchecked"
            }
            Err(why) => {
                bad.push((task.id.to_string(), why.clone()));
                "FAILED"
            }
        };
        println!(
            "{:<width$}  {:<12}  {:<12}  {:<10}  {:>7.1}",
            task.id.as_str(),
            reference.cell(),
            nothing.cell(),
            word,
            started.elapsed().as_secs_f64()
        );
    }
    for (id, why) in &bad {
        println!("FAILED {id}: {}", cut(why, 600));
    }
    for p in &problems {
        println!("NOT LOADED {p}");
    }
    println!(
        "{ok} ok, {} failed, {unchecked} without a reference solution, {} not loaded",
        bad.len(),
        problems.len()
    );
    Ok(if bad.is_empty() && problems.is_empty() {
        0
    } else {
        1
    })
}

fn cut(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(n).collect::<String>())
    }
}
