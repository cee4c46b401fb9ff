//! The environment object: tasks, episodes and their sandboxes.

use openclaw_env_kit::{first_observation, observation, step_outcome, EpisodeTable, Progress};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::serde_json::{self, json, Value};
use openclaw_plugin_api::{
    parse_config_section, Action, Env, Evaluation, HostServices, Observation, PluginResult,
    StepOutcome, Task,
};
use openclaw_sandbox::{Limits, Run, Sandbox, SandboxConfig, Workdir};

use crate::answer::{self, Shape};
use crate::tools::{self, Call};

/// The default configuration (`config.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The `[env]` section of the configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// JSON array or JSONL of `{question, answer}`; empty for the built-in problems.
    pub data_path: String,
    /// Every n-th task goes to the `eval` split.
    pub eval_every: usize,
    /// Assistant turns per episode.
    pub max_turns: u32,
    /// Interpreter calls per episode.
    pub max_tool_calls: u32,
    /// Characters of interpreter output kept.
    pub output_chars: usize,
    /// Wall clock and CPU seconds of one call.
    pub timeout_seconds: u64,
    /// Wall clock of all the calls of one step: later calls of a step get what is left, then an
    /// error (keep it below the host's per-call timeout, 60 s by default).
    pub step_seconds: u64,
    /// Address space of one call's processes, MiB.
    pub memory_mb: u64,
    /// The bubblewrap binary.
    pub bwrap: String,
    /// `plus_minus_one` or `retool` (see [`Shape`]).
    pub reward_shape: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_path: String::new(),
            eval_every: 5,
            max_turns: 16,
            max_tool_calls: 16,
            output_chars: 1024,
            timeout_seconds: 10,
            step_seconds: 45,
            memory_mb: 512,
            bwrap: "bwrap".into(),
            reward_shape: "plus_minus_one".into(),
        }
    }
}

/// One tool's entry of the `[tools]` section (what `TOOLS_CONFIG` lists): its limits, each
/// replacing the `[env]` value of the same meaning.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct ToolLimits {
    /// Wall clock and CPU seconds of one call (`env.timeout_seconds`).
    pub timeout_seconds: Option<u64>,
    /// Address space of one call's processes, MiB (`env.memory_mb`).
    pub memory_mb: Option<u64>,
    /// Characters of output kept (`env.output_chars`).
    pub output_chars: Option<usize>,
    /// Calls per episode (`env.max_tool_calls`).
    pub max_calls: Option<u32>,
}

/// Applies a `[tools]` section: every tool named must be one this environment offers.
fn apply_tools(cfg: &mut Config, tools: &HashMap<String, ToolLimits>) -> PluginResult<()> {
    for (name, limits) in tools {
        if name != tools::NAME {
            return Err(format!(
                "[tools] names `{name}`; the tool-call environment offers only `{}`",
                tools::NAME
            ));
        }
        if let Some(v) = limits.timeout_seconds {
            cfg.timeout_seconds = v;
        }
        if let Some(v) = limits.memory_mb {
            cfg.memory_mb = v;
        }
        if let Some(v) = limits.output_chars {
            cfg.output_chars = v;
        }
        if let Some(v) = limits.max_calls {
            cfg.max_tool_calls = v;
        }
    }
    Ok(())
}

/// One problem.
#[derive(Clone, Debug)]
struct Problem {
    question: String,
    label: String,
}

struct Episode {
    problem: Problem,
    workdir: Workdir,
    progress: Progress,
    /// The agent's messages, in order (the answer is the last box among them).
    said: Vec<String>,
}

/// The tool-call environment.
pub struct ToolcallEnv {
    cfg: Config,
    shape: Shape,
    sandbox: Sandbox,
    /// The tools array every observation offers (made once).
    tools_json: String,
    problems: Vec<Problem>,
    episodes: EpisodeTable<Episode>,
}

/// The prompt, templated once per episode.
fn instruction(question: &str) -> String {
    format!(
        "Solve the problem below. You can run Python with the `{}` tool; what the code prints \
         comes back to you. Finish with the final answer as `Answer: \\boxed{{<answer>}}`.\n\n\
         Problem: {question}",
        tools::NAME
    )
}

impl ToolcallEnv {
    /// Runs one call in the episode's sandbox within `wall`; the text the agent gets back.
    fn execute(&self, workdir: &Workdir, code: &str, wall: Duration) -> String {
        let run = Run::new(["python3", "-c", code]).wall(wall);
        match workdir.run(&run) {
            Err(e) => format!("[sandbox error] {e}"),
            Ok(out) => {
                let mut text = out.stdout_text();
                text.push_str(&out.stderr_text());
                if out.timed_out {
                    text.push_str(&format!("\n[timed out after {} s]", wall.as_secs()));
                }
                text
            }
        }
    }
}

impl Env for ToolcallEnv {
    fn new(config: &str, _host: HostServices) -> PluginResult<Self> {
        let mut cfg: Config = parse_config_section(config, "env")?;
        let tools: HashMap<String, ToolLimits> = parse_config_section(config, "tools")?;
        apply_tools(&mut cfg, &tools)?;
        if cfg.eval_every < 2 {
            return Err(format!(
                "env.eval_every must be at least 2, got {}",
                cfg.eval_every
            ));
        }
        if cfg.max_turns == 0 || cfg.timeout_seconds == 0 || cfg.step_seconds == 0 {
            return Err(
                "env.max_turns, env.timeout_seconds and env.step_seconds must be at least 1".into(),
            );
        }
        if !(64..=1 << 20).contains(&cfg.memory_mb) {
            return Err(format!(
                "env.memory_mb must be between 64 and 1048576, got {}",
                cfg.memory_mb
            ));
        }
        if cfg.output_chars == 0 || cfg.output_chars > 1 << 20 || cfg.timeout_seconds > 86_400 {
            return Err(
                "env.output_chars must be between 1 and 1048576, env.timeout_seconds at most 86400"
                    .into(),
            );
        }
        let shape = match cfg.reward_shape.as_str() {
            "plus_minus_one" => Shape::PlusMinusOne,
            "retool" => Shape::Retool,
            other => {
                return Err(format!(
                    "env.reward_shape must be `plus_minus_one` or `retool`, got `{other}`"
                ))
            }
        };
        let problems = if cfg.data_path.is_empty() {
            builtin_problems(200)
        } else {
            load_problems(&PathBuf::from(&cfg.data_path))?
        };
        let sandbox = Sandbox::new(SandboxConfig {
            bwrap: PathBuf::from(&cfg.bwrap),
            limits: Limits {
                memory_bytes: cfg.memory_mb << 20,
                cpu_seconds: cfg.timeout_seconds,
                processes: 32,
                wall: Duration::from_secs(cfg.timeout_seconds),
                output_bytes: (cfg.output_chars * 4).max(4096),
                ..Limits::default()
            },
            ..SandboxConfig::default()
        })
        .map_err(|e| format!("env `toolcall`: {e}"))?;
        Ok(ToolcallEnv {
            cfg,
            shape,
            sandbox,
            tools_json: tools::schema(),
            problems,
            episodes: EpisodeTable::default(),
        })
    }

    fn tasks(&self, split: &str) -> PluginResult<Vec<Task>> {
        let eval = match split {
            "train" => false,
            "eval" | "test" => true,
            other => {
                return Err(format!(
                    "unknown split `{other}`; the splits are `train` and `eval`"
                ))
            }
        };
        Ok(self
            .problems
            .iter()
            .enumerate()
            .filter(|(i, _)| (i % self.cfg.eval_every == self.cfg.eval_every - 1) == eval)
            .map(|(i, p)| Task {
                id: format!("toolcall-{i}").into(),
                instruction: instruction(&p.question).into(),
                data_json: json!({"question": p.question, "answer": p.label})
                    .to_string()
                    .into(),
            })
            .collect())
    }

    fn reset(&self, task: &Task, _seed: u64) -> PluginResult<(u64, Observation)> {
        let data: Value = serde_json::from_str(&task.data_json)
            .map_err(|e| format!("task `{}`: data_json is not JSON: {e}", task.id))?;
        let problem = problem_of(&data).ok_or_else(|| {
            format!(
                "task `{}`: data_json needs `question` and `answer`",
                task.id
            )
        })?;
        let workdir = self
            .sandbox
            .workdir()
            .map_err(|e| format!("env `toolcall`: {e}"))?;
        let prompt = instruction(&problem.question);
        let id = self.episodes.open(Episode {
            problem,
            workdir,
            progress: Progress::default(),
            said: Vec::new(),
        })?;
        Ok((id, first_observation(&prompt, &self.tools_json)))
    }

    fn step(&self, episode: u64, action: &Action) -> PluginResult<StepOutcome> {
        self.episodes.with(episode, |ep| {
            ep.progress.next_turn(episode)?;
            ep.said.push(action.message.content.to_string());
            let answered = answer::last_boxed(&action.message.content).is_some();
            let calls: Vec<Call> = if answered {
                Vec::new()
            } else {
                tools::calls(&action.message)
            };
            let mut messages = Vec::with_capacity(calls.len());
            let step_end = Instant::now() + Duration::from_secs(self.cfg.step_seconds);
            for call in &calls {
                let left = step_end.saturating_duration_since(Instant::now());
                let output = match &call.code {
                    Err(why) => format!("[tool error] {why}"),
                    Ok(_) if ep.progress.tool_calls >= self.cfg.max_tool_calls => format!(
                        "[tool error] the limit of {} interpreter calls is reached; give your answer",
                        self.cfg.max_tool_calls
                    ),
                    Ok(_) if left < Duration::from_secs(1) => format!(
                        "[tool error] this message's calls used its {} s; give your answer or call again",
                        self.cfg.step_seconds
                    ),
                    Ok(code) => {
                        ep.progress.tool_calls += 1;
                        let wall = left.min(Duration::from_secs(self.cfg.timeout_seconds));
                        self.execute(&ep.workdir, code, wall)
                    }
                };
                messages.push(tools::result_message(call, &output, self.cfg.output_chars));
            }
            let finished = calls.is_empty();
            let truncated = !finished && ep.progress.turns >= self.cfg.max_turns;
            ep.progress.done = finished || truncated;
            let p = ep.progress;
            let metadata = json!({"tool_calls": p.tool_calls, "turns": p.turns});
            let next = observation(messages, &self.tools_json);
            Ok(step_outcome(next, p.done, truncated, &metadata))
        })
    }

    fn evaluate(&self, episode: u64) -> PluginResult<Evaluation> {
        self.episodes.with(episode, |ep| {
            let found = ep.said.iter().rev().find_map(|s| answer::last_boxed(s));
            let correct = found
                .as_deref()
                .is_some_and(|a| answer::matches(a, &ep.problem.label));
            Ok(Evaluation {
                reward: answer::reward(correct, ep.progress.tool_calls, self.shape),
                solved: correct,
                details_json: json!({
                    "answer": found,
                    "label": ep.problem.label,
                    "tool_calls": ep.progress.tool_calls,
                    "turns": ep.progress.turns,
                })
                .to_string()
                .into(),
            })
        })
    }

    fn reference(&self, task: &Task) -> PluginResult<Vec<Action>> {
        let data: Value = serde_json::from_str(&task.data_json)
            .map_err(|e| format!("task `{}`: data_json is not JSON: {e}", task.id))?;
        let problem = problem_of(&data).ok_or_else(|| {
            format!(
                "task `{}`: data_json needs `question` and `answer`",
                task.id
            )
        })?;
        Ok(vec![Action {
            message: openclaw_plugin_api::Message::new(
                "assistant",
                &format!("Answer: \\boxed{{{}}}", problem.label),
            ),
        }])
    }

    fn close(&self, episode: u64) -> PluginResult<()> {
        let ep = self.episodes.close(episode)?;
        // Dropping the episode removes its work directory, outside the table's lock.
        drop(ep);
        Ok(())
    }
}

/// `{question, answer}` or GSM8K's `{question, ground_truth_answer}`.
fn problem_of(v: &Value) -> Option<Problem> {
    let question = v["question"].as_str()?.trim().to_string();
    let answer = match (&v["answer"], &v["ground_truth_answer"]) {
        (Value::String(s), _) | (Value::Null, Value::String(s)) => s.clone(),
        (Value::Number(n), _) | (Value::Null, Value::Number(n)) => n.to_string(),
        _ => return None,
    };
    (!question.is_empty()).then(|| Problem {
        question,
        label: answer::label(&answer),
    })
}

/// Problems from a JSON array or a JSONL file.
fn load_problems(path: &std::path::Path) -> PluginResult<Vec<Problem>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("env.data_path `{}`: {e}", path.display()))?;
    let rows: Vec<Value> = if text.trim_start().starts_with('[') {
        serde_json::from_str(&text)
            .map_err(|e| format!("env.data_path `{}`: {e}", path.display()))?
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map_err(|e| format!("env.data_path `{}` line {}: {e}", path.display(), i + 1))
            })
            .collect::<PluginResult<_>>()?
    };
    let problems: Vec<Problem> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            problem_of(r).ok_or_else(|| {
                format!(
                    "env.data_path `{}`: row {} needs a `question` and an `answer` (or \
                     `ground_truth_answer`)",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect::<PluginResult<_>>()?;
    if problems.is_empty() {
        return Err(format!(
            "env.data_path `{}` holds no problems",
            path.display()
        ));
    }
    Ok(problems)
}

/// `n` multiplications of two 4-digit numbers: easy with the interpreter, hard in one's head.
fn builtin_problems(n: usize) -> Vec<Problem> {
    // A fixed generator (SplitMix64), so the set is the same in every build.
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| {
            let a = 1000 + next() % 9000;
            let b = 1000 + next() % 9000;
            Problem {
                question: format!("What is {a} times {b}?"),
                label: (a * b).to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_section_sets_the_interpreters_limits_and_names_no_other_tool() {
        let text = "[env]\ntimeout_seconds = 10\n[tools.code_interpreter]\ntimeout_seconds = 3\nmax_calls = 2\noutput_chars = 64\n";
        let mut cfg: Config = parse_config_section(text, "env").unwrap();
        let tools: HashMap<String, ToolLimits> = parse_config_section(text, "tools").unwrap();
        apply_tools(&mut cfg, &tools).unwrap();
        assert_eq!(
            (
                cfg.timeout_seconds,
                cfg.max_tool_calls,
                cfg.output_chars,
                cfg.memory_mb
            ),
            (3, 2, 64, 512)
        );
        let other: HashMap<String, ToolLimits> =
            parse_config_section("[tools.web_search]\nmax_calls = 1\n", "tools").unwrap();
        let e = apply_tools(&mut cfg, &other).unwrap_err();
        assert!(
            e.contains("web_search") && e.contains("code_interpreter"),
            "{e}"
        );
        let typo = parse_config_section::<HashMap<String, ToolLimits>>(
            "[tools.code_interpreter]\ntimeout = 3\n",
            "tools",
        )
        .unwrap_err();
        assert!(typo.contains("timeout"), "{typo}");
    }

    #[test]
    fn problems_are_read_from_both_layouts_and_bad_rows_are_named() {
        let dir = std::env::temp_dir().join(format!("toolcall-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jsonl = dir.join("p.jsonl");
        std::fs::write(
            &jsonl,
            "{\"question\": \"1+1?\", \"answer\": \"2\"}\n\n{\"question\": \"2+2?\", \"answer\": 4}\n",
        )
        .unwrap();
        let p = load_problems(&jsonl).unwrap();
        assert_eq!((p.len(), p[1].label.as_str()), (2, "4"));
        let array = dir.join("p.json");
        std::fs::write(
            &array,
            "[{\"question\": \"q\", \"ground_truth_answer\": \"work #### 36\"}]",
        )
        .unwrap();
        assert_eq!(load_problems(&array).unwrap()[0].label, "36");
        std::fs::write(&jsonl, "{\"question\": \"q\"}\n").unwrap();
        let err = load_problems(&jsonl).unwrap_err();
        assert!(
            err.contains("row 1 needs a `question` and an `answer`"),
            "{err}"
        );
        std::fs::write(&jsonl, "{\"question\": \"q\",\n").unwrap();
        assert!(load_problems(&jsonl).unwrap_err().contains("line 1"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_builtin_problems_are_fixed_and_need_the_tool() {
        let a = builtin_problems(5);
        let b = builtin_problems(5);
        assert_eq!(a[3].question, b[3].question);
        let q = &a[0].question;
        let nums: Vec<u64> = q
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|s| s.parse().ok())
            .collect();
        assert_eq!(nums.len(), 2);
        assert!(nums.iter().all(|&n| (1000..10000).contains(&n)));
        assert_eq!(a[0].label, (nums[0] * nums[1]).to_string());
    }
}
