//! The environment object: its instances, the episodes' repositories, and scoring after the
//! loop in a fresh copy.

use std::path::{Path, PathBuf};
use std::time::Duration;

use openclaw_env_kit::{first_observation, observation, step_outcome, EpisodeTable, Progress};
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::serde_json::{json, Value};
use openclaw_plugin_api::{
    parse_config_section, serde_json, Action, Env, Evaluation, HostServices, Message, Observation,
    PluginResult, StepOutcome, Task,
};
use openclaw_sandbox::{Limits, Run, RunOutput, Sandbox, SandboxConfig, Workdir};

use crate::instances::{self, Instance};
use crate::{protocol, score};

/// The default configuration (`config.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// Where the repository is inside the sandbox (SWE-bench's images use `/testbed`).
pub const TESTBED: &str = "/testbed";

/// The `[env]` section of the configuration.
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct Config {
    /// A SWE-bench JSONL file or a folder of them; empty for the built-in set.
    pub instances: String,
    /// A repository, or a folder of them.
    pub repos: String,
    /// Rows without a split: every n-th goes to `test`.
    pub eval_every: usize,
    /// Replies per episode.
    pub max_turns: u32,
    /// Replies without exactly one bash block before the episode ends.
    pub max_format_errors: u32,
    /// Most seconds of one command.
    pub exec_seconds: u64,
    /// Characters of a command's output shown.
    pub output_chars: usize,
    /// Most seconds of the tests when scoring.
    pub eval_seconds: u64,
    /// The test command; the node ids are appended.
    pub test_command: String,
    /// The reward of an unresolved instance (the original's -1, or 0).
    pub unresolved_reward: f32,
    /// Address space of each process, MiB.
    pub memory_mb: u64,
    /// Memory of all of a command's processes together, MiB.
    pub memory_total_mb: u64,
    /// Size of an episode's repository folder, MiB.
    pub work_mb: u64,
    /// The bubblewrap binary.
    pub bwrap: String,
    /// The system every instance runs on: a Dockerfile (the supported subset) or an image
    /// TOML; empty: the host's. A row's own `image` (a path beside its file) wins.
    pub image: String,
    /// Where built images are kept; empty: `OPENCLAW_IMAGE_CACHE`, else the default cache.
    pub image_cache: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            instances: String::new(),
            repos: String::new(),
            eval_every: 5,
            max_turns: 20,
            max_format_errors: 3,
            exec_seconds: 40,
            output_chars: 10_000,
            eval_seconds: 50,
            test_command: "python3 -m pytest -p no:cacheprovider -rA -o addopts= --tb=no".into(),
            unresolved_reward: 0.0,
            memory_mb: 1024,
            memory_total_mb: 8192,
            work_mb: 1024,
            bwrap: "bwrap".into(),
            image: String::new(),
            image_cache: String::new(),
        }
    }
}

struct Episode {
    inst: Instance,
    workdir: Workdir,
    progress: Progress,
    format_errors: u32,
    ended: &'static str,
}

/// The SWE environment.
pub struct SweEnv {
    cfg: Config,
    sandbox: Sandbox,
    instances: Vec<Instance>,
    problems: Vec<String>,
    /// The built-in instances' folder, removed with the environment.
    _builtin: Option<tempfile::TempDir>,
    episodes: EpisodeTable<Episode>,
    /// Instances with an image, by id: the sandbox on it.
    imaged: std::collections::HashMap<String, Sandbox>,
}

/// A command with what every command here gets: git's identity, no pager, `HOME` outside the repository so
/// caches do not end up in the diff.
fn command(script: &str) -> Run {
    command_argv(["bash", "-c", script])
}

/// [`command`] with its own argument list.
fn command_argv<I: IntoIterator<Item = S>, S: Into<String>>(argv: I) -> Run {
    Run::new(argv)
        .env("HOME", "/tmp")
        .env("GIT_AUTHOR_NAME", "agent")
        .env("GIT_AUTHOR_EMAIL", "agent@sandbox")
        .env("GIT_COMMITTER_NAME", "agent")
        .env("GIT_COMMITTER_EMAIL", "agent@sandbox")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PAGER", "cat")
        .env("PAGER", "cat")
        .env("TERM", "dumb")
        .env("PYTHONDONTWRITEBYTECODE", "1")
}

/// What went wrong with a sandboxed command, for messages.
fn failure(out: &RunOutput) -> String {
    let why = if out.timed_out {
        "timed out".to_string()
    } else if out.memory_exceeded {
        "ran out of memory".to_string()
    } else {
        format!("exit code {:?}", out.exit_code)
    };
    let text = format!("{}{}", out.stdout_text(), out.stderr_text());
    format!("{why}: {}", cut_tail(text.trim(), 600))
}

fn cut_tail(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        text.to_string()
    } else {
        format!("…{}", text.chars().skip(count - n).collect::<String>())
    }
}

impl SweEnv {
    /// Puts the instance's repository at its base commit into `workdir`. Only the base commit
    /// is fetched (depth 1): the commits after it, which hold the real fix, never reach the
    /// sandbox.
    fn checkout(&self, workdir: &Workdir, inst: &Instance) -> PluginResult<()> {
        let script = format!(
            // The source is read by upload-pack, which reads only protected configuration: a
            // global file (in the sandbox's own /tmp home) trusts it and lets it send one commit.
            "set -e\nprintf '[safe]\\n\\tdirectory = *\\n[uploadpack]\\n\\tallowAnySHA1InWant = true\\n' > /tmp/.gitconfig\ngit init -q .\ngit fetch -q --depth 1 file:///src {base}\ngit checkout -q FETCH_HEAD\n",
            base = inst.base_commit
        );
        let run = command(&script)
            .ro_bind(&inst.repo_dir, "/src")
            .wall(Duration::from_secs(self.cfg.eval_seconds));
        let out = workdir
            .run(&run)
            .map_err(|e| format!("instance `{}`: sandbox: {e}", inst.id))?;
        if !out.success() {
            return Err(format!(
                "instance `{}`: checking out {} failed ({})",
                inst.id,
                inst.base_commit,
                failure(&out)
            ));
        }
        Ok(())
    }

    /// The instance a `Task` names: its id, or `instance_id` in its data. Only instances of
    /// the set are run (a pool's client chooses nothing else).
    fn instance_of(&self, task: &Task) -> PluginResult<Instance> {
        let data: Value = serde_json::from_str(&task.data_json).unwrap_or(Value::Null);
        let id = data["instance_id"].as_str().unwrap_or(task.id.as_str());
        self.instances
            .iter()
            .find(|i| i.id == id)
            .cloned()
            .ok_or_else(|| {
                format!(
                    "no instance `{id}` in {} ({} instances)",
                    if self._builtin.is_some() {
                        "the built-in set"
                    } else {
                        "the instance set (SWE_BENCH_PATH)"
                    },
                    self.instances.len()
                )
            })
    }

    /// Runs one command of the agent in its repository; the observation and whether it
    /// submitted.
    fn run_command(&self, ep: &Episode, script: &str) -> (String, bool) {
        // One stream, in order, as the agent's shell would show it.
        let run = command(&format!("exec 2>&1\n{script}"))
            .wall(Duration::from_secs(self.cfg.exec_seconds));
        match ep.workdir.run(&run) {
            Err(e) => (
                protocol::observation(None, &format!("sandbox: {e}"), "", self.cfg.output_chars),
                false,
            ),
            Ok(out) => {
                let text = out.stdout_text();
                let mut note = Vec::new();
                if out.timed_out {
                    note.push(format!(
                        "the command timed out after {} s and was killed",
                        self.cfg.exec_seconds
                    ));
                }
                if out.memory_exceeded {
                    note.push(
                        "the command used more than the sandbox's memory and was killed".into(),
                    );
                }
                if out.workdir_full {
                    note.push("/testbed grew past the sandbox's size limit".into());
                }
                if out.truncated {
                    note.push("output past the sandbox's limit was dropped".into());
                }
                let submitted = !out.timed_out && protocol::submits(&text);
                (
                    protocol::observation(
                        out.exit_code,
                        &note.join("; "),
                        &text,
                        self.cfg.output_chars,
                    ),
                    submitted,
                )
            }
        }
    }

    /// Scores the episode's repository: its diff (tests left out) and the instance's
    /// test_patch applied to a fresh copy, then the listed tests. The details carry the whole
    /// diff as `patch`.
    fn score(&self, ep: &Episode) -> PluginResult<(bool, Value)> {
        let inst = &ep.inst;
        // The repository's configuration is the agent's: no external diff program, text
        // conversion, file-system monitor or replaced object may shape the diff that is scored.
        let git = "git -c core.fsmonitor=false -c diff.external= -c core.attributesFile=/dev/null";
        let diff_run = command(&format!(
            "{git} add -A >/dev/null 2>&1; {git} diff --cached --binary --no-ext-diff --no-textconv --no-color --no-renames --src-prefix=a/ --dst-prefix=b/ {}",
            inst.base_commit
        ))
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .wall(Duration::from_secs(self.cfg.exec_seconds));
        let out = ep
            .workdir
            .run(&diff_run)
            .map_err(|e| format!("instance `{}`: reading the diff: {e}", inst.id))?;
        let mut details = json!({"instance": inst.id});
        if !out.success() || out.truncated {
            details["why"] = json!(if out.truncated {
                "the diff is larger than the sandbox's output limit".to_string()
            } else {
                format!("reading the diff failed ({})", failure(&out))
            });
            return Ok((false, details));
        }
        let diff = out.stdout_text();
        // The whole diff as the agent left it (a pool's `/diff` answers with it).
        details["patch"] = json!(diff.as_str());
        let (kept, dropped) = score::without_tests(&diff);
        details["diff_lines"] = json!(kept.lines().count());
        details["dropped_test_changes"] = json!(dropped);

        let fresh = self
            .sandbox_of(inst)
            .workdir()
            .map_err(|e| format!("env `swe`: {e}"))?;
        self.checkout(&fresh, inst)?;
        let apply = |patch: &str| {
            fresh.run(
                &command("git apply --whitespace=nowarn -")
                    .stdin(patch.as_bytes().to_vec())
                    .wall(Duration::from_secs(self.cfg.exec_seconds)),
            )
        };
        if !kept.trim().is_empty() {
            let out = apply(&kept).map_err(|e| format!("instance `{}`: {e}", inst.id))?;
            if !out.success() {
                details["why"] = json!(format!("the diff does not apply: {}", failure(&out)));
                return Ok((false, details));
            }
        }
        if !inst.test_patch.trim().is_empty() {
            let out =
                apply(&inst.test_patch).map_err(|e| format!("instance `{}`: {e}", inst.id))?;
            if !out.success() {
                details["why"] = json!(format!(
                    "the instance's test_patch does not apply after the diff: {}",
                    failure(&out)
                ));
                return Ok((false, details));
            }
        }
        let ids: Vec<&str> = inst
            .fail_to_pass
            .iter()
            .chain(&inst.pass_to_pass)
            .map(String::as_str)
            .collect();
        let mut argv = vec![
            "bash".to_string(),
            "-c".into(),
            format!("exec 2>&1\n{} \"$@\"", self.cfg.test_command),
            "tests".into(),
        ];
        argv.extend(ids.iter().map(|s| s.to_string()));
        // Python must not import what the diff planted beside the tests before pytest itself
        // (a `pytest.py` at the root), nor plugins from outside the repository.
        let mut run = command_argv(argv);
        for (k, v) in [
            ("PYTHONSAFEPATH", "1"),
            ("PYTHONNOUSERSITE", "1"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"),
        ] {
            run = run.env(k, v);
        }
        let run = run.wall(Duration::from_secs(self.cfg.eval_seconds));
        let out = fresh
            .run(&run)
            .map_err(|e| format!("instance `{}`: running the tests: {e}", inst.id))?;
        let text = out.stdout_text();
        let seen = score::statuses(&text);
        let (resolved, rows) = score::verdict(&inst.fail_to_pass, &inst.pass_to_pass, &seen);
        details["tests"] = rows
            .iter()
            .map(|(t, s, k)| json!({"test": t, "status": s, "kind": k}))
            .collect();
        details["passed"] = json!(rows.iter().filter(|r| r.1 == "PASSED").count());
        details["total"] = json!(rows.len());
        details["timed_out"] = json!(out.timed_out);
        details["seconds"] = json!(out.elapsed.as_secs_f64());
        details["output_tail"] = json!(cut_tail(&text, 2000));
        Ok((resolved, details))
    }

    /// The sandbox an instance runs in: on its image, or on the host's system.
    fn sandbox_of(&self, inst: &Instance) -> &Sandbox {
        self.imaged.get(&inst.id).unwrap_or(&self.sandbox)
    }

    /// The instances this environment has, in order.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }
}

/// Builds the instances' images (`env.image`, or a row's own `image`; each distinct one once)
/// and a sandbox on each. An instance whose image cannot be read or built is reported and left
/// out.
fn images(
    cfg: &Config,
    base: &SandboxConfig,
    host: &HostServices,
    list: &mut Vec<Instance>,
    problems: &mut Vec<String>,
) -> PluginResult<std::collections::HashMap<String, Sandbox>> {
    use openclaw_env_images::{ImageCache, ImageSpec};
    let mut out = std::collections::HashMap::new();
    let read = |path: &Path| -> Result<ImageSpec, String> {
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(".toml"))
        {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            ImageSpec::from_toml(&text).map_err(|e| e.to_string())
        } else {
            ImageSpec::from_dockerfile(path).map_err(|e| e.to_string())
        }
    };
    let shared = if cfg.image.is_empty() {
        None
    } else {
        Some(read(Path::new(&cfg.image)).map_err(|e| format!("env.image: {e}"))?)
    };
    if shared.is_none() && list.iter().all(|i| i.image.is_none()) {
        return Ok(out);
    }
    let cache = if cfg.image_cache.is_empty() {
        ImageCache::at_default()
    } else {
        Ok(ImageCache::new(&cfg.image_cache))
    }
    .map_err(|e| format!("env `swe`: the image cache: {e}"))?;
    let mut failed = Vec::new();
    let mut items = Vec::new();
    for inst in list.iter() {
        let mut spec = match (&inst.image, &shared) {
            (Some(p), _) => match read(p) {
                Ok(s) => s,
                Err(e) => {
                    failed.push((inst.id.clone(), e));
                    continue;
                }
            },
            (None, Some(s)) => s.clone(),
            (None, None) => continue,
        };
        // The checkout, the diff and the patches are git's work inside the sandbox.
        if !spec.apt.iter().any(|p| p == "git") {
            spec.apt.push("git".into());
            spec.apt.sort();
        }
        items.push((inst.id.clone(), spec));
    }
    let built = openclaw_env_images::sandboxes(&cache, &items, base, |id, spec| {
        host.info(&format!(
            "env `swe`: building the image {} (instance `{id}`); a first build takes a minute or two",
            spec.origin
        ))
    });
    for (id, made) in built {
        match made {
            Ok((sandbox, _)) => {
                out.insert(id, sandbox);
            }
            Err(e) => failed.push((id, e)),
        }
    }
    for (id, why) in failed {
        let line = format!("instance `{id}`: its image: {why}");
        host.warn(&format!("env `swe`: skipped {line}"));
        problems.push(line);
        list.retain(|i| i.id != id);
    }
    if list.is_empty() {
        return Err(format!(
            "env `swe`: no instance is left:\n  {}",
            problems.join("\n  ")
        ));
    }
    Ok(out)
}

impl Env for SweEnv {
    fn new(config: &str, host: HostServices) -> PluginResult<Self> {
        let cfg: Config = parse_config_section(config, "env")?;
        if cfg.eval_every < 2 {
            return Err(format!(
                "env.eval_every must be at least 2, got {}",
                cfg.eval_every
            ));
        }
        if cfg.max_turns == 0 || cfg.exec_seconds == 0 || cfg.eval_seconds == 0 {
            return Err(
                "env.max_turns, env.exec_seconds and env.eval_seconds must be at least 1".into(),
            );
        }
        if !(64..=1 << 20).contains(&cfg.memory_mb)
            || !(cfg.memory_mb..=1 << 22).contains(&cfg.memory_total_mb)
        {
            return Err(format!(
                "env.memory_mb must be between 64 and 1048576 and env.memory_total_mb between it and 4194304, got {} and {}",
                cfg.memory_mb, cfg.memory_total_mb
            ));
        }
        if !(16..=1 << 20).contains(&cfg.output_chars) {
            return Err(format!(
                "env.output_chars must be between 16 and 1048576, got {}",
                cfg.output_chars
            ));
        }
        if cfg.test_command.trim().is_empty() {
            return Err("env.test_command is empty".into());
        }
        let (loaded, builtin) = if cfg.instances.is_empty() {
            if !cfg.repos.is_empty() {
                return Err("env.repos is set but env.instances (SWE_BENCH_PATH) is not: the built-in set brings its own repositories".into());
            }
            let prefix = "openclaw-swe-instances-";
            openclaw_sandbox::clear_dead_folders(&std::env::temp_dir(), prefix);
            let dir = tempfile::Builder::new()
                .prefix(&format!("{prefix}{}-", std::process::id()))
                .tempdir()
                .map_err(|e| format!("env `swe`: unpacking the built-in instances: {e}"))?;
            // The sandbox's user reads the repositories from here.
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| format!("env `swe`: {e}"))?;
            }
            let loaded = instances::builtin(dir.path())
                .map_err(|e| format!("env `swe`: the built-in instances: {e}"))?;
            (loaded, Some(dir))
        } else {
            let repos = (!cfg.repos.is_empty()).then(|| PathBuf::from(&cfg.repos));
            let loaded = instances::load(Path::new(&cfg.instances), repos.as_deref())
                .map_err(|e| format!("env `swe`: {e}"))?;
            (loaded, None)
        };
        let mut list = loaded.instances;
        for p in &loaded.problems {
            host.warn(&format!("env `swe`: skipped {p}"));
        }
        if list.is_empty() {
            return Err(format!(
                "env `swe`: no usable instance in {}{}",
                cfg.instances,
                if loaded.problems.is_empty() {
                    String::new()
                } else {
                    format!(":\n  {}", loaded.problems.join("\n  "))
                }
            ));
        }
        instances::assign_splits(&mut list, cfg.eval_every);
        let longest = cfg.exec_seconds.max(cfg.eval_seconds);
        let sandbox_config = SandboxConfig {
            bwrap: PathBuf::from(&cfg.bwrap),
            limits: Limits {
                memory_bytes: cfg.memory_mb << 20,
                memory_total_bytes: cfg.memory_total_mb << 20,
                cpu_seconds: longest,
                processes: 64,
                work_bytes: cfg.work_mb << 20,
                wall: Duration::from_secs(longest),
                ..Limits::default()
            },
            work_mount: PathBuf::from(TESTBED),
            ..SandboxConfig::default()
        };
        let sandbox =
            Sandbox::new(sandbox_config.clone()).map_err(|e| format!("env `swe`: {e}"))?;
        let mut problems = loaded.problems;
        let imaged = images(&cfg, &sandbox_config, &host, &mut list, &mut problems)?;
        Ok(SweEnv {
            cfg,
            sandbox,
            instances: list,
            problems,
            _builtin: builtin,
            episodes: EpisodeTable::default(),
            imaged,
        })
    }

    fn tasks(&self, split: &str) -> PluginResult<Vec<Task>> {
        let keep = |inst: &Instance| match split {
            "train" => Ok(inst.split == "train"),
            "test" | "eval" => Ok(inst.split == "test"),
            "all" => Ok(true),
            other => Err(format!(
                "unknown split `{other}`; the splits are `train`, `test` (or `eval`) and `all`"
            )),
        };
        let mut out = Vec::new();
        for inst in &self.instances {
            if keep(inst)? {
                out.push(Task {
                    id: inst.id.as_str().into(),
                    instruction: protocol::prompt(inst).into(),
                    data_json: json!({
                        "instance_id": inst.id,
                        "repo": inst.repo,
                        "split": inst.split,
                        "data_source": "swe",
                    })
                    .to_string()
                    .into(),
                });
            }
        }
        Ok(out)
    }

    fn reset(&self, task: &Task, _seed: u64) -> PluginResult<(u64, Observation)> {
        let inst = self.instance_of(task)?;
        let workdir = self
            .sandbox_of(&inst)
            .workdir()
            .map_err(|e| format!("env `swe`: {e}"))?;
        self.checkout(&workdir, &inst)?;
        let prompt = protocol::prompt(&inst);
        let id = self.episodes.open(Episode {
            inst,
            workdir,
            progress: Progress::default(),
            format_errors: 0,
            ended: "",
        })?;
        Ok((id, first_observation(&prompt, "")))
    }

    fn step(&self, episode: u64, action: &Action) -> PluginResult<StepOutcome> {
        self.episodes.with(episode, |ep| {
            ep.progress.next_turn(episode)?;
            let blocks = protocol::bash_blocks(&action.message.content);
            let (reply, submitted) = if blocks.len() == 1 {
                ep.progress.tool_calls += 1;
                self.run_command(ep, &blocks[0])
            } else {
                ep.format_errors += 1;
                (protocol::format_error(blocks.len()), false)
            };
            let given_up = ep.format_errors >= self.cfg.max_format_errors;
            let truncated = !submitted && !given_up && ep.progress.turns >= self.cfg.max_turns;
            ep.progress.done = submitted || given_up || truncated;
            ep.ended = if submitted {
                "submitted"
            } else if given_up {
                "format_errors"
            } else if truncated {
                "max_turns"
            } else {
                ""
            };
            let metadata = json!({
                "commands": ep.progress.tool_calls,
                "turns": ep.progress.turns,
                "format_errors": ep.format_errors,
                "ended": ep.ended,
            });
            let next = observation(vec![Message::new("user", &reply)], "");
            Ok(step_outcome(next, ep.progress.done, truncated, &metadata))
        })
    }

    fn evaluate(&self, episode: u64) -> PluginResult<Evaluation> {
        self.episodes.with(episode, |ep| {
            let (resolved, mut details) = self.score(ep)?;
            details["resolved"] = json!(resolved);
            details["turns"] = json!(ep.progress.turns);
            details["commands"] = json!(ep.progress.tool_calls);
            details["ended"] = json!(if ep.ended.is_empty() {
                "cut off"
            } else {
                ep.ended
            });
            Ok(Evaluation {
                reward: if resolved {
                    1.0
                } else {
                    self.cfg.unresolved_reward
                },
                solved: resolved,
                details_json: details.to_string().into(),
            })
        })
    }

    fn close(&self, episode: u64) -> PluginResult<()> {
        // Dropped outside the table's lock: removing the repository holds no other episode up.
        drop(self.episodes.close(episode)?);
        Ok(())
    }

    fn reference(&self, task: &Task) -> PluginResult<Vec<Action>> {
        let inst = self.instance_of(task)?;
        if inst.patch.trim().is_empty() {
            return Err(format!("instance `{}` has no reference patch", inst.id));
        }
        Ok([
            protocol::reply(
                "Apply the reference fix.",
                &protocol::apply_command(&inst.patch),
            ),
            protocol::reply("Submit.", &protocol::submit_command()),
        ]
        .into_iter()
        .map(|text| Action {
            message: Message::new("assistant", &text),
        })
        .collect())
    }

    fn problems(&self) -> Vec<String> {
        self.problems.clone()
    }
}
