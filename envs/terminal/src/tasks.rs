//! Tasks in the terminal-bench 1.x layout: a folder per task with `task.yaml` (the
//! instruction and limits), `run-tests.sh` and `tests/` (run after the episode, never shown to
//! the agent), `solution.sh` (the reference), and, instead of the Dockerfile this machine
//! cannot build, an optional `setup.sh` that prepares `/app` in the sandbox.

use std::path::{Path, PathBuf};

use openclaw_env_images::{ImageSpec, Step};
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::PluginResult;

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_tasks.rs"));
}

/// `task.yaml`: the keys this environment reads (others, such as `author_email` or
/// `expert_time_estimate_min`, are allowed and ignored).
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default)]
pub struct TaskYaml {
    /// What the agent is told.
    pub instruction: String,
    /// The older form: `[{key: base, description: …}]`.
    pub descriptions: Vec<Description>,
    /// `easy`, `medium` or `hard`.
    pub difficulty: String,
    /// The task's kind (`file-operations`, `git`, …).
    pub category: String,
    /// Free labels.
    pub tags: Vec<String>,
    /// How the tests' output is read: only `pytest`.
    pub parser_name: String,
    /// Seconds the agent may take (recorded; the host's step limits apply).
    pub max_agent_timeout_sec: f64,
    /// Seconds the tests may take.
    pub max_test_timeout_sec: f64,
}

/// One entry of the older `descriptions` list.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default)]
pub struct Description {
    /// `base` for the instruction.
    pub key: String,
    /// Its text.
    pub description: String,
}

impl Default for TaskYaml {
    fn default() -> Self {
        TaskYaml {
            instruction: String::new(),
            descriptions: Vec::new(),
            difficulty: String::new(),
            category: String::new(),
            tags: Vec::new(),
            parser_name: "pytest".into(),
            max_agent_timeout_sec: 360.0,
            max_test_timeout_sec: 60.0,
        }
    }
}

/// One task, checked.
#[derive(Clone, Debug)]
pub struct TaskSpec {
    /// Its folder's name.
    pub name: String,
    /// Its folder, with every link resolved (inside `root`).
    pub dir: PathBuf,
    /// The task set's folder, with every link resolved: no file of the task is read from
    /// outside it.
    pub root: PathBuf,
    /// Its `task.yaml`.
    pub yaml: TaskYaml,
    /// The system it runs on: its `Dockerfile` (the supported subset) or `image.toml`, when it
    /// has one; the host's `/usr` otherwise.
    pub image: Option<ImageSpec>,
}

/// `path` with its links resolved, when it exists and stays inside `root` (itself resolved);
/// `None` when nothing is there. A link that leads out of the task set is an error: a task's
/// files are host files the environment reads and shows, so `tests -> /etc` or
/// `setup.sh -> /etc/shadow` must not pass.
fn inside(root: &Path, path: &Path, what: &str) -> PluginResult<Option<PathBuf>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    let real = std::fs::canonicalize(path).map_err(|e| format!("{what}: {e}"))?;
    if !real.starts_with(root) {
        return Err(format!(
            "{what} leads outside the task set's folder (a link out of it); refused"
        ));
    }
    Ok(Some(real))
}

impl TaskSpec {
    /// Reads and checks the task in `dir`, a folder of the task set in `root` (both with their
    /// links resolved); errors name the task and what is wrong.
    pub fn load(root: &Path, dir: &Path) -> PluginResult<TaskSpec> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{}: not a task folder name", dir.display()))?
            .to_string();
        let dir = inside(root, dir, &format!("task `{name}`"))?
            .ok_or_else(|| format!("task `{name}`: no such folder"))?;
        let yaml_path = inside(
            root,
            &dir.join("task.yaml"),
            &format!("task `{name}`: task.yaml"),
        )?
        .ok_or_else(|| format!("task `{name}`: task.yaml is missing"))?;
        let text = std::fs::read_to_string(&yaml_path)
            .map_err(|e| format!("task `{name}`: task.yaml: {e}"))?;
        let mut yaml: TaskYaml =
            serde_norway::from_str(&text).map_err(|e| format!("task `{name}`: task.yaml: {e}"))?;
        if yaml.instruction.trim().is_empty() {
            if let Some(d) = yaml.descriptions.iter().find(|d| d.key == "base") {
                yaml.instruction = d.description.clone();
            }
        }
        if yaml.instruction.trim().is_empty() {
            return Err(format!("task `{name}`: task.yaml has no `instruction`"));
        }
        if yaml.parser_name != "pytest" {
            return Err(format!(
                "task `{name}`: parser_name `{}` is not supported; tests are read as pytest's summary",
                yaml.parser_name
            ));
        }
        if !yaml.max_test_timeout_sec.is_finite() || yaml.max_test_timeout_sec <= 0.0 {
            return Err(format!(
                "task `{name}`: max_test_timeout_sec must be positive, got {}",
                yaml.max_test_timeout_sec
            ));
        }
        let mut spec = TaskSpec {
            name,
            dir,
            root: root.to_path_buf(),
            yaml,
            image: None,
        };
        for needed in ["run-tests.sh", "tests"] {
            if spec.file(needed)?.is_none() {
                return Err(format!(
                    "task `{}`: {needed} is missing (a task needs task.yaml, run-tests.sh and tests/)",
                    spec.name
                ));
            }
        }
        spec.file("setup.sh")?;
        spec.image = spec.image_spec()?;
        Ok(spec)
    }

    /// The task's image: its `Dockerfile`, else its `image.toml`. The tests run in it too, so
    /// it gets Debian's pytest (a task's tests cannot download theirs: there is no network); a
    /// `COPY` that would put the tests or the solution where the agent can read them is refused.
    fn image_spec(&self) -> PluginResult<Option<ImageSpec>> {
        let named = |e: &dyn std::fmt::Display| format!("task `{}`: {e}", self.name);
        let mut spec = if let Some(path) = self.file("Dockerfile")?.filter(|p| p.is_file()) {
            ImageSpec::from_dockerfile(&path).map_err(|e| named(&e))?
        } else if let Some(path) = self.file("image.toml")?.filter(|p| p.is_file()) {
            let text = std::fs::read_to_string(&path).map_err(|e| named(&e))?;
            ImageSpec::from_toml(&text).map_err(|e| named(&e))?
        } else {
            return Ok(None);
        };
        for step in &spec.steps {
            if let Step::Copy { line, sources, .. } = step {
                let hidden = ["tests", "run-tests.sh", "solution.sh"];
                // By name, and by where each source leads (a link `t -> tests` copies the tests).
                let real = |p: &str| std::fs::canonicalize(self.dir.join(p)).ok();
                let hidden_real: Vec<PathBuf> = hidden.iter().filter_map(|h| real(h)).collect();
                if let Some(s) = sources.iter().find(|s| {
                    let s = s.trim_start_matches("./").trim_end_matches('/');
                    let named = s.is_empty()
                        || s == "."
                        || s.contains('*')
                        || hidden
                            .iter()
                            .any(|h| s == *h || s.starts_with(&format!("{h}/")));
                    let leads = real(s).is_some_and(|src| {
                        hidden_real
                            .iter()
                            .any(|h| h.starts_with(&src) || src.starts_with(h))
                    });
                    named || leads
                }) {
                    return Err(named(&format!(
                        "Dockerfile:{line}: COPY {s} would put the task's tests or solution in the image, where the agent reads them; copy the files the task needs by name"
                    )));
                }
            }
        }
        if !spec.apt.iter().any(|p| p == "python3-pytest") {
            spec.apt.push("python3-pytest".into());
            spec.apt.sort();
        }
        Ok(Some(spec))
    }

    /// The task's file or folder `rel`, links resolved and checked to stay inside the task
    /// set (`None` when it has none).
    pub fn file(&self, rel: &str) -> PluginResult<Option<PathBuf>> {
        inside(
            &self.root,
            &self.dir.join(rel),
            &format!("task `{}`: {rel}", self.name),
        )
    }

    /// The first message, worded as the original's.
    pub fn prompt(&self) -> String {
        format!(
            "Task name:{}\nTask instruction: {}",
            self.name,
            self.yaml.instruction.trim()
        )
    }

    /// Its `setup.sh`, when it has one.
    pub fn setup(&self) -> PluginResult<Option<PathBuf>> {
        Ok(self.file("setup.sh")?.filter(|p| p.is_file()))
    }

    /// Its `solution.sh`, when it has one.
    pub fn solution(&self) -> PluginResult<Option<PathBuf>> {
        Ok(self.file("solution.sh")?.filter(|p| p.is_file()))
    }
}

/// Every task folder under `root` that loads (sorted by name; hidden folders skipped), `root`
/// with its links resolved, and why each of the others did not load: one broken task is left
/// out, not fatal to the set.
pub fn load_all(root: &Path) -> PluginResult<(PathBuf, Vec<TaskSpec>, Vec<String>)> {
    let root = std::fs::canonicalize(root)
        .map_err(|e| format!("env.tasks_dir `{}`: {e}", root.display()))?;
    let entries =
        std::fs::read_dir(&root).map_err(|e| format!("env.tasks_dir `{}`: {e}", root.display()))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
        })
        .collect();
    dirs.sort();
    let (mut tasks, mut problems) = (Vec::new(), Vec::new());
    for d in &dirs {
        match TaskSpec::load(&root, d) {
            Ok(t) => tasks.push(t),
            Err(e) => problems.push(e),
        }
    }
    if tasks.is_empty() {
        return Err(format!(
            "env.tasks_dir `{}` holds no task that loads{}",
            root.display(),
            if problems.is_empty() {
                String::new()
            } else {
                format!(":\n  {}", problems.join("\n  "))
            }
        ));
    }
    Ok((root, tasks, problems))
}

/// Writes the built-in tasks into `dir` (scripts executable, everything readable by the
/// sandbox's user).
pub fn extract_builtin(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = |m| std::fs::Permissions::from_mode(m);
    std::fs::set_permissions(dir, mode(0o755))?;
    for (rel, bytes) in builtin::FILES {
        let path = dir.join(rel);
        let mut parent = path.parent();
        while let Some(p) = parent.filter(|p| *p != dir) {
            std::fs::create_dir_all(p)?;
            std::fs::set_permissions(p, mode(0o755))?;
            parent = p.parent();
        }
        std::fs::write(&path, bytes)?;
        let exec = rel.ends_with(".sh");
        std::fs::set_permissions(&path, mode(if exec { 0o755 } else { 0o644 }))?;
    }
    Ok(())
}

/// Number of built-in tasks.
pub fn builtin_count() -> usize {
    builtin::FILES
        .iter()
        .filter(|(rel, _)| rel.ends_with("/task.yaml"))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task folder with the files a task needs and `dockerfile`.
    fn task_with(root: &Path, name: &str, dockerfile: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("tests")).unwrap();
        std::fs::write(dir.join("task.yaml"), "instruction: do it\n").unwrap();
        std::fs::write(dir.join("run-tests.sh"), "true\n").unwrap();
        std::fs::write(dir.join("tests/test_outputs.py"), "def test_x(): pass\n").unwrap();
        std::fs::write(dir.join("Dockerfile"), dockerfile).unwrap();
        dir
    }

    #[test]
    fn an_image_may_not_copy_the_tests_by_name_or_through_a_link() {
        let root = tempfile::tempdir().unwrap();
        task_with(
            root.path(),
            "by-name",
            "FROM debian:bookworm\nCOPY tests /app/tests\n",
        );
        let linked = task_with(
            root.path(),
            "by-link",
            "FROM debian:bookworm\nCOPY t /app/t\n",
        );
        std::os::unix::fs::symlink("tests", linked.join("t")).unwrap();
        task_with(root.path(), "whole", "FROM debian:bookworm\nCOPY . /app\n");
        let fine = task_with(
            root.path(),
            "fine",
            "FROM debian:bookworm\nCOPY data.txt /app/\n",
        );
        std::fs::write(fine.join("data.txt"), "1\n").unwrap();
        let (_, tasks, problems) = load_all(root.path()).unwrap();
        assert_eq!(tasks.len(), 1, "{problems:?}");
        assert!(tasks[0]
            .image
            .as_ref()
            .unwrap()
            .apt
            .contains(&"python3-pytest".to_string()));
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems
                .iter()
                .all(|p| p.contains("would put the task's tests")),
            "{problems:?}"
        );
    }
}
