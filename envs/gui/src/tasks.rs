//! The task set: a folder of task folders, each with `task.toml` and the pages it serves.
//!
//! ```text
//! <task-id>/task.toml       instruction, split ("train" or "test"), start (the page file),
//!                           check (a JavaScript expression: truthy = solved), max_steps,
//!                           category
//! <task-id>/<pages>         the start page and what it loads (html, css, js, png, svg, json)
//! <task-id>/solution.json   a right run: an array of computer_use argument objects
//! <task-id>/wrong.json      a plausible wrong run, which the check must refuse
//! ```
//!
//! Folder names (the task ids) and the `start` path use letters, digits, `.`, `_` and `-`
//! (and `/` in `start`), so a page's URL needs no escaping. A folder whose `task.toml` cannot
//! be read or checked is reported (on stderr and by [`load_all`]) and skipped; folders without
//! a `task.toml`, hidden ones and files beside the folders (the checker script) are not tasks.

use std::path::{Path, PathBuf};

use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::serde_json::{self, Value};
use openclaw_plugin_api::{toml, PluginResult};

use crate::actions;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_tasks.rs"));
}

/// `task.toml`. Other keys are allowed and ignored.
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde")]
pub struct TaskToml {
    /// What the agent is told.
    pub instruction: String,
    /// `train` or `test` (`eval` is read as `test`).
    pub split: String,
    /// The page the episode opens, relative to the task's folder.
    pub start: String,
    /// A JavaScript expression run in the page after the episode: truthy means solved.
    pub check: String,
    /// Steps the agent gets (cut to the environment's `max_turns`).
    pub max_steps: u32,
    /// The kind of task (`form`, `settings`, `list`, `flow`, `drag`, `other`, ...).
    pub category: String,
}

/// One task, checked.
#[derive(Clone, Debug)]
pub struct TaskSpec {
    /// Its folder's name.
    pub id: String,
    /// Its folder, links resolved (inside `root`).
    pub dir: PathBuf,
    /// The task set's folder, links resolved.
    pub root: PathBuf,
    /// Its `task.toml`.
    pub toml: TaskToml,
}

/// A task folder that was skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    /// The folder's name.
    pub id: String,
    /// What is wrong.
    pub why: String,
}

fn plain_name(s: &str, slash: bool) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c) || (slash && c == '/'))
}

impl TaskSpec {
    /// Reads and checks the task in folder `dir` of the task set `root` (both with their links
    /// resolved); errors say what is wrong (the caller names the task).
    pub fn load(root: &Path, dir: &Path) -> Result<TaskSpec, String> {
        let id = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or("not a task folder name")?
            .to_string();
        if !plain_name(&id, false) {
            return Err("task folder names may only use letters, digits, '.', '_' and '-'".into());
        }
        let real = std::fs::canonicalize(dir).map_err(|e| e.to_string())?;
        if !real.starts_with(root) {
            return Err("the folder leads outside the task set (a link out of it)".into());
        }
        let text = std::fs::read_to_string(real.join("task.toml"))
            .map_err(|e| format!("task.toml: {e}"))?;
        let mut meta: TaskToml =
            toml::from_str(&text).map_err(|e| format!("task.toml: {}", e.message().trim()))?;
        if meta.instruction.trim().is_empty() {
            return Err("task.toml: `instruction` is empty".into());
        }
        meta.split = match meta.split.as_str() {
            "train" => "train".into(),
            "test" | "eval" => "test".into(),
            other => {
                return Err(format!(
                    "task.toml: `split` must be \"train\" or \"test\", got {other:?}"
                ))
            }
        };
        if meta.check.trim().is_empty() {
            return Err("task.toml: `check` is empty".into());
        }
        if meta.max_steps == 0 {
            return Err("task.toml: `max_steps` must be at least 1".into());
        }
        if !plain_name(&meta.start, true)
            || meta.start.starts_with('/')
            || meta
                .start
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(format!(
                "task.toml: `start` {:?} must be a path inside the task's folder of letters, digits, '.', '_', '-' and '/'",
                meta.start
            ));
        }
        let page = std::fs::canonicalize(real.join(&meta.start))
            .map_err(|e| format!("task.toml: `start` {:?}: {e}", meta.start))?;
        if !page.starts_with(&real) || !page.is_file() {
            return Err(format!(
                "task.toml: `start` {:?} is not a file of the task's folder",
                meta.start
            ));
        }
        let spec = TaskSpec {
            id,
            dir: real,
            root: root.to_path_buf(),
            toml: meta,
        };
        for which in ["solution", "wrong"] {
            if spec.dir.join(format!("{which}.json")).exists() {
                spec.actions(which)?;
            }
        }
        Ok(spec)
    }

    /// The start page's path under the task set's folder (what the server is asked for).
    pub fn start_path(&self) -> String {
        format!("{}/{}", self.id, self.toml.start)
    }

    /// Whether it is in the `test` split.
    pub fn is_test(&self) -> bool {
        self.toml.split == "test"
    }

    /// The scripted run in `<which>.json` (`solution` or `wrong`): computer_use argument
    /// objects, each checked to be one the tool accepts.
    pub fn actions(&self, which: &str) -> Result<Vec<Value>, String> {
        let file = format!("{which}.json");
        let path =
            std::fs::canonicalize(self.dir.join(&file)).map_err(|e| format!("{file}: {e}"))?;
        if !path.starts_with(&self.dir) {
            return Err(format!("{file} leads outside the task's folder"));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{file}: {e}"))?;
        let list: Vec<Value> =
            serde_json::from_str(&text).map_err(|e| format!("{file}: not a JSON array: {e}"))?;
        for (i, a) in list.iter().enumerate() {
            actions::parse(a).map_err(|e| format!("{file}: action {i}: {e}"))?;
        }
        Ok(list)
    }
}

/// Every task under `root`, sorted by id, with `root` with its links resolved, and the task
/// folders skipped as broken (each also reported on stderr). An error when `root` cannot be
/// read or holds no task at all.
pub fn load_all(root: &Path) -> PluginResult<(PathBuf, Vec<TaskSpec>, Vec<Broken>)> {
    let root = std::fs::canonicalize(root)
        .map_err(|e| format!("env.tasks_dir `{}`: {e}", root.display()))?;
    let entries =
        std::fs::read_dir(&root).map_err(|e| format!("env.tasks_dir `{}`: {e}", root.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.join("task.toml").exists())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    dirs.sort();
    let mut tasks = Vec::new();
    let mut broken = Vec::new();
    for d in &dirs {
        match TaskSpec::load(&root, d) {
            Ok(t) => tasks.push(t),
            Err(why) => {
                let id = d
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                eprintln!("env `gui`: task `{id}` skipped: {why}");
                broken.push(Broken { id, why });
            }
        }
    }
    if tasks.is_empty() {
        let mut msg = format!("env.tasks_dir `{}` holds no usable task", root.display());
        if let Some(b) = broken.first() {
            msg.push_str(&format!(
                " ({} broken; `{}`: {})",
                broken.len(),
                b.id,
                b.why
            ));
        }
        return Err(msg);
    }
    Ok((root, tasks, broken))
}

/// The tasks of a split: `train`, `test` (or `eval`), or `all`.
pub fn split<'a>(tasks: &'a [TaskSpec], name: &str) -> PluginResult<Vec<&'a TaskSpec>> {
    let keep = |t: &TaskSpec| match name {
        "train" => Ok(!t.is_test()),
        "test" | "eval" => Ok(t.is_test()),
        "all" => Ok(true),
        other => Err(format!(
            "unknown split `{other}`; the splits are `train`, `test` (or `eval`) and `all`"
        )),
    };
    let mut out = Vec::new();
    for t in tasks {
        if keep(t)? {
            out.push(t);
        }
    }
    Ok(out)
}

/// Writes the built-in tasks into `dir`.
pub fn extract_builtin(dir: &Path) -> std::io::Result<()> {
    for (rel, bytes) in builtin::FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
    }
    Ok(())
}

/// Number of built-in tasks.
pub fn builtin_count() -> usize {
    builtin::FILES
        .iter()
        .filter(|(rel, _)| rel.ends_with("/task.toml") && rel.matches('/').count() == 1)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(root: &Path, id: &str, toml: &str) -> PathBuf {
        let d = root.join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("task.toml"), toml).unwrap();
        std::fs::write(d.join("index.html"), "<button>OK</button>").unwrap();
        d
    }

    fn good(split: &str) -> String {
        format!(
            "instruction = \"Click OK.\"\nsplit = \"{split}\"\nstart = \"index.html\"\ncheck = \"window.done === true\"\nmax_steps = 10\ncategory = \"other\"\nnotes = \"ignored\"\n"
        )
    }

    #[test]
    fn tasks_load_sorted_and_split() {
        let root = tempfile::tempdir().unwrap();
        task(root.path(), "b-task", &good("test"));
        let a = task(root.path(), "a-task", &good("train"));
        task(root.path(), "c-task", &good("eval"));
        std::fs::write(
            a.join("solution.json"),
            r#"[{"action": "left_click", "coordinate": [500, 500]}, {"action": "terminate", "status": "success"}]"#,
        )
        .unwrap();
        std::fs::write(root.path().join("check.py"), "# not a task").unwrap();
        std::fs::create_dir(root.path().join("assets")).unwrap();
        let (real, tasks, broken) = load_all(root.path()).unwrap();
        assert_eq!(real, std::fs::canonicalize(root.path()).unwrap());
        assert!(broken.is_empty(), "{broken:?}");
        let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a-task", "b-task", "c-task"]);
        assert_eq!(tasks[0].start_path(), "a-task/index.html");
        let ids = |s: &str| -> Vec<String> {
            split(&tasks, s)
                .unwrap()
                .iter()
                .map(|t| t.id.clone())
                .collect()
        };
        assert_eq!(ids("train"), ["a-task"]);
        assert_eq!(ids("test"), ["b-task", "c-task"]);
        assert_eq!(ids("eval"), ids("test"));
        assert_eq!(ids("all").len(), 3);
        assert!(split(&tasks, "dev")
            .unwrap_err()
            .contains("unknown split `dev`"));
        assert_eq!(tasks[0].actions("solution").unwrap().len(), 2);
        assert!(tasks[1].actions("solution").is_err());
    }

    #[test]
    fn broken_tasks_are_reported_and_skipped() {
        let root = tempfile::tempdir().unwrap();
        task(root.path(), "fine", &good("train"));
        task(root.path(), "no-check", "instruction = \"x\"\nsplit = \"train\"\nstart = \"index.html\"\nmax_steps = 3\ncategory = \"x\"\n");
        task(root.path(), "bad-split", &good("dev"));
        task(root.path(), "bad-toml", "instruction = ");
        task(
            root.path(),
            "no-page",
            &good("train").replace("index.html", "missing.html"),
        );
        task(
            root.path(),
            "escape",
            &good("train").replace("index.html", "../fine/index.html"),
        );
        task(
            root.path(),
            "zero-steps",
            &good("train").replace("max_steps = 10", "max_steps = 0"),
        );
        let bad_run = task(root.path(), "bad-run", &good("train"));
        std::fs::write(bad_run.join("wrong.json"), r#"[{"action": "fly"}]"#).unwrap();
        let (_, tasks, broken) = load_all(root.path()).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].id, "fine");
        let why = |id: &str| {
            broken
                .iter()
                .find(|b| b.id == id)
                .unwrap_or_else(|| panic!("{id} not reported: {broken:?}"))
                .why
                .clone()
        };
        assert!(why("no-check").contains("check"), "{}", why("no-check"));
        assert!(why("bad-split").contains("`split`"));
        assert!(why("bad-toml").contains("task.toml"));
        assert!(why("no-page").contains("missing.html"));
        assert!(why("escape").contains("`start`"));
        assert!(why("zero-steps").contains("max_steps"));
        assert!(why("bad-run").contains("wrong.json: action 0: unknown action `fly`"));
        assert_eq!(broken.len(), 7);

        let empty = tempfile::tempdir().unwrap();
        task(empty.path(), "only-bad", &good("dev"));
        let e = load_all(empty.path()).unwrap_err();
        assert!(
            e.contains("no usable task") && e.contains("only-bad"),
            "{e}"
        );
    }

    #[test]
    fn the_built_in_set_unpacks_into_task_folders() {
        let dir = tempfile::tempdir().unwrap();
        extract_builtin(dir.path()).unwrap();
        let folders = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().join("task.toml").is_file())
            .count();
        assert_eq!(folders, builtin_count());
    }
}
