//! The original's evaluation suites (`eval --eval-tasks "conversation,coding,tool-use"`), each
//! measured as shares with 95% intervals for a trained model and its base side by side:
//!
//! - `conversation`: the simulated users' held-out prompts; the preference (plain, on topic)
//!   without an instruction, and an explicit instruction (markdown, plain) followed;
//! - `coding`: small programming tasks in the terminal environment's sandbox, solved when
//!   their unit tests pass;
//! - `tool-use`: GSM8K-style problems with the tool-call environment's code interpreter,
//!   solved when the boxed answer is right.
//!
//! `--eval-tasks` also takes a task file (JSON Lines, one task a line, each naming its suite)
//! and, as before, a number (held-out prompts of the built-in world or of `--env`).

use super::stats::Share;
use anyhow::{bail, Context, Result};
use openclaw_plugin_api::Task as EnvTask;
use openclaw_sim::{Task, TaskKind};
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// One suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Suite {
    /// The simulated users' prompts.
    Conversation,
    /// Programming tasks checked by their tests in the sandbox.
    Coding,
    /// Problems solved with the code interpreter.
    ToolUse,
}

impl Suite {
    /// Every suite, in report order.
    pub const ALL: [Suite; 3] = [Suite::Conversation, Suite::Coding, Suite::ToolUse];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Conversation => "conversation",
            Suite::Coding => "coding",
            Suite::ToolUse => "tool-use",
        }
    }

    /// The suite `name` names (`tool_use` and `tooluse` too).
    pub fn parse(name: &str) -> Option<Suite> {
        match name.trim().to_lowercase().replace('_', "-").as_str() {
            "conversation" => Some(Suite::Conversation),
            "coding" => Some(Suite::Coding),
            "tool-use" | "tooluse" => Some(Suite::ToolUse),
            _ => None,
        }
    }

    /// The environment a suite's episodes run in.
    pub fn env(self) -> Option<&'static str> {
        match self {
            Suite::Conversation => None,
            Suite::Coding => Some("terminal"),
            Suite::ToolUse => Some("toolcall"),
        }
    }
}

/// What `--eval-tasks` says.
#[derive(Clone, Debug, PartialEq)]
pub enum EvalTasks {
    /// A number of held-out prompts (the built-in world, or `--env`'s tasks).
    Count(usize),
    /// Suites by name, each on its own held-out tasks.
    Suites(Vec<Suite>),
    /// A task file.
    File(PathBuf),
}

impl EvalTasks {
    /// Reads `--eval-tasks`: a number, a comma-separated list of suites, or a file's path.
    pub fn parse(text: &str) -> Result<EvalTasks> {
        let text = text.trim();
        if let Ok(n) = text.parse::<usize>() {
            return Ok(EvalTasks::Count(n));
        }
        let path = Path::new(text);
        if path.is_file() {
            return Ok(EvalTasks::File(path.to_path_buf()));
        }
        let mut suites = Vec::new();
        for name in text.split(',').filter(|n| !n.trim().is_empty()) {
            let suite = Suite::parse(name).with_context(|| {
                format!(
                    "--eval-tasks: `{}` is not a number, a file or a suite (conversation, coding, tool-use)",
                    name.trim()
                )
            })?;
            if !suites.contains(&suite) {
                suites.push(suite);
            }
        }
        if suites.is_empty() {
            bail!("--eval-tasks is empty: give a number, a task file or suites (conversation,coding,tool-use)");
        }
        Ok(EvalTasks::Suites(suites))
    }
}

/// The tasks of each suite: `None` takes the suite's own held-out tasks.
#[derive(Clone, Debug, Default)]
pub struct SuiteTasks {
    /// The suites to run, in order.
    pub suites: Vec<Suite>,
    /// Conversation prompts.
    pub conversation: Option<Vec<Task>>,
    /// Terminal task names.
    pub coding: Option<Vec<String>>,
    /// Tool-use problems, as the tool-call environment's tasks.
    pub tool_use: Option<Vec<EnvTask>>,
}

impl SuiteTasks {
    /// The suites on their own held-out tasks.
    pub fn held_out(suites: Vec<Suite>) -> SuiteTasks {
        SuiteTasks {
            suites,
            ..Default::default()
        }
    }

    /// Reads a task file: JSON Lines, each line `{"suite": "conversation", "prompt": ...,
    /// "must_mention": ...}`, `{"suite": "tool-use", "question": ..., "answer": ...}` or
    /// `{"suite": "coding", "task": NAME}` (a task of the terminal environment). The suites are
    /// those the file has, in report order.
    pub fn read(path: &Path) -> Result<SuiteTasks> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the task file {}", path.display()))?;
        let mut out = SuiteTasks::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let at = || format!("{}:{}", path.display(), i + 1);
            let v: Value =
                serde_json::from_str(line).with_context(|| format!("{}: not JSON", at()))?;
            let field = |k: &str| -> Result<String> {
                v.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .with_context(|| format!("{}: `{k}` (text) is missing", at()))
            };
            let name = field("suite")?;
            let suite = Suite::parse(&name).with_context(|| {
                format!(
                    "{}: suite `{name}` is not one of conversation, coding, tool-use",
                    at()
                )
            })?;
            match suite {
                Suite::Conversation => {
                    let prompt = field("prompt")?;
                    let must_mention = field("must_mention")?;
                    // A number to state is checked as arithmetic; anything else as a subject.
                    let kind = if must_mention.chars().all(|c| c.is_ascii_digit()) {
                        TaskKind::Arithmetic
                    } else {
                        TaskKind::Concept
                    };
                    out.conversation.get_or_insert_with(Vec::new).push(Task {
                        kind,
                        prompt,
                        subject: must_mention.clone(),
                        must_mention,
                    });
                }
                Suite::Coding => out.coding.get_or_insert_with(Vec::new).push(field("task")?),
                Suite::ToolUse => {
                    let question = field("question")?;
                    if v.get("answer").is_none() {
                        bail!("{}: a tool-use task needs its `answer`", at());
                    }
                    let id = format!("{}-{}", path.display(), i + 1);
                    out.tool_use.get_or_insert_with(Vec::new).push(EnvTask {
                        id: id.into(),
                        instruction: question.into(),
                        data_json: v.to_string().into(),
                    });
                }
            }
        }
        out.suites = Suite::ALL
            .into_iter()
            .filter(|s| match s {
                Suite::Conversation => out.conversation.is_some(),
                Suite::Coding => out.coding.is_some(),
                Suite::ToolUse => out.tool_use.is_some(),
            })
            .collect();
        if out.suites.is_empty() {
            bail!("{}: no tasks", path.display());
        }
        Ok(out)
    }
}

/// One measure of one suite for the model and its base.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SuiteRow {
    /// The suite's name.
    pub suite: &'static str,
    /// What is counted.
    pub measure: String,
    /// The base model's share (none when there is no base, or it could not run).
    pub base: Option<Share>,
    /// The evaluated model's share (none when the suite could not run).
    pub model: Option<Share>,
    /// Why a side is missing.
    pub note: String,
}

impl SuiteRow {
    /// `model - base`, when both ran.
    pub fn delta(&self) -> Option<f64> {
        Some(self.model.as_ref()?.value - self.base.as_ref()?.value)
    }
}

/// A suites evaluation.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteReport {
    /// The evaluated model.
    pub model_path: String,
    /// Its base (none: not compared).
    pub base_model_path: Option<String>,
    /// The rows, suite by suite.
    pub rows: Vec<SuiteRow>,
}

impl SuiteReport {
    /// The report as a table.
    pub fn table(&self) -> String {
        let cell = |s: &Option<Share>| match s {
            Some(s) => format!("{:.3} [{:.2},{:.2}] n={}", s.value, s.lo, s.hi, s.n),
            None => "-".to_string(),
        };
        let mut out = format!(
            "{:<13} {:<34} {:<26} {:<26} {:>7}\n",
            "suite", "measure", "base", "model", "delta"
        );
        for r in &self.rows {
            out += &format!(
                "{:<13} {:<34} {:<26} {:<26} {:>7}{}\n",
                r.suite,
                r.measure,
                cell(&r.base),
                cell(&r.model),
                r.delta().map_or("-".to_string(), |d| format!("{d:+.3}")),
                if r.note.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", r.note)
                }
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_tasks_is_a_number_a_list_of_suites_or_a_file() {
        assert_eq!(EvalTasks::parse("3").unwrap(), EvalTasks::Count(3));
        assert_eq!(
            EvalTasks::parse("conversation,coding,tool-use").unwrap(),
            EvalTasks::Suites(Suite::ALL.to_vec())
        );
        assert_eq!(
            EvalTasks::parse(" tool_use, conversation ,tool-use").unwrap(),
            EvalTasks::Suites(vec![Suite::ToolUse, Suite::Conversation])
        );
        let e = EvalTasks::parse("conversation,poetry")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`poetry`") && e.contains("tool-use"), "{e}");
        let tmp = tempfile::NamedTempFile::new().unwrap();
        let path = tmp.path().to_path_buf();
        assert_eq!(
            EvalTasks::parse(&path.display().to_string()).unwrap(),
            EvalTasks::File(path)
        );
    }

    #[test]
    fn a_task_file_gives_each_suite_its_rows_and_names_bad_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("tasks.jsonl");
        std::fs::write(
            &file,
            [
                r#"{"suite": "tool-use", "question": "What is 6 times 7?", "answer": "42"}"#,
                r#"{"suite": "conversation", "prompt": "Explain tides.", "must_mention": "tide"}"#,
                "",
                r#"{"suite": "conversation", "prompt": "What is 2 plus 3?", "must_mention": "5"}"#,
            ]
            .join("\n"),
        )
        .unwrap();
        let t = SuiteTasks::read(&file).unwrap();
        assert_eq!(t.suites, [Suite::Conversation, Suite::ToolUse]);
        let conv = t.conversation.unwrap();
        assert_eq!(conv.len(), 2);
        assert_eq!(conv[1].kind, TaskKind::Arithmetic);
        assert!(openclaw_sim::on_topic(
            &conv[0],
            "The tides follow the moon."
        ));
        let tools = t.tool_use.unwrap();
        assert_eq!(tools[0].instruction.as_str(), "What is 6 times 7?");
        assert!(tools[0].data_json.contains("\"answer\""));
        assert!(t.coding.is_none());

        std::fs::write(&file, r#"{"suite": "coding"}"#).unwrap();
        let e = SuiteTasks::read(&file).unwrap_err().to_string();
        assert!(e.contains("tasks.jsonl:1") && e.contains("`task`"), "{e}");
        std::fs::write(&file, r#"{"suite": "poetry", "task": "x"}"#).unwrap();
        let e = SuiteTasks::read(&file).unwrap_err().to_string();
        assert!(e.contains("`poetry`"), "{e}");
    }

    #[test]
    fn the_table_shows_both_sides_and_their_difference() {
        let report = SuiteReport {
            model_path: "ckpt".into(),
            base_model_path: Some("base".into()),
            rows: vec![
                SuiteRow {
                    suite: "conversation",
                    measure: "preference".into(),
                    base: Some(Share::new(30, 100)),
                    model: Some(Share::new(90, 100)),
                    note: String::new(),
                },
                SuiteRow {
                    suite: "coding",
                    measure: "solved".into(),
                    base: None,
                    model: None,
                    note: "bubblewrap is missing".into(),
                },
            ],
        };
        let t = report.table();
        assert!(
            t.contains("0.300") && t.contains("0.900") && t.contains("+0.600"),
            "{t}"
        );
        assert!(t.contains("(bubblewrap is missing)"), "{t}");
    }
}
