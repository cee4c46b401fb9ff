//! SWE-bench instances: read from a JSONL file (or a folder of them), each matched with a git
//! repository that holds its base commit; or the built-in set, whose base commits are made here
//! from plain folders with a fixed identity and date, so their hashes are the same everywhere.
//!
//! A row that cannot be used (a missing field, no tests, no repository, a base commit the
//! repository lacks) is reported and skipped: one broken row never stops the set from loading.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use openclaw_plugin_api::serde_json::{self, Value};

mod builtin {
    include!(concat!(env!("OUT_DIR"), "/builtin_instances.rs"));
}

/// One instance, checked.
#[derive(Clone, Debug)]
pub struct Instance {
    /// `instance_id`.
    pub id: String,
    /// `repo` (`owner/name`).
    pub repo: String,
    /// The commit the agent starts from.
    pub base_commit: String,
    /// The issue the agent is given.
    pub problem_statement: String,
    /// The reference fix (`patch`); empty when the row has none.
    pub patch: String,
    /// The tests that show the issue, applied before scoring.
    pub test_patch: String,
    /// Tests that must go from failing to passing.
    pub fail_to_pass: Vec<String>,
    /// Tests that must keep passing.
    pub pass_to_pass: Vec<String>,
    /// `train` or `test`, from the row or the `eval_every` rule.
    pub split: String,
    /// A git repository (host path) that holds `base_commit`.
    pub repo_dir: PathBuf,
    /// The row's own system image (a Dockerfile or image TOML beside its file), if it names one.
    pub image: Option<PathBuf>,
}

/// The instances that loaded, and why the others did not.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Usable instances, by id.
    pub instances: Vec<Instance>,
    /// One line per skipped row or file.
    pub problems: Vec<String>,
}

/// Runs git on the host with no user or system configuration, so a user's settings (hooks,
/// signing, a default branch) cannot change what is built or read.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "safe.directory=*", "-c", "core.autocrlf=false"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "openclaw")
        .env("GIT_AUTHOR_EMAIL", "swe-tasks@openclaw.invalid")
        .env("GIT_AUTHOR_DATE", "1704067200 +0000")
        .env("GIT_COMMITTER_NAME", "openclaw")
        .env("GIT_COMMITTER_EMAIL", "swe-tasks@openclaw.invalid")
        .env("GIT_COMMITTER_DATE", "1704067200 +0000")
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| format!("running git: {e} (install git)"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A string field of a row, required.
fn text(row: &Value, key: &str) -> Result<String, String> {
    match &row[key] {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Err(format!("no `{key}`")),
        other => Err(format!("`{key}` is not a string: {other}")),
    }
}

/// FAIL_TO_PASS / PASS_TO_PASS: a list of strings, or (the official rows) that list as a JSON
/// string.
fn tests(row: &Value, key: &str) -> Result<Vec<String>, String> {
    let v = match &row[key] {
        Value::Null => return Ok(Vec::new()),
        Value::String(s) => serde_json::from_str::<Value>(s)
            .map_err(|e| format!("`{key}` is a string but not a JSON list: {e}"))?,
        other => other.clone(),
    };
    match v {
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                // Passed to the test command as arguments: none may read as an option.
                Value::String(s) if s.starts_with('-') => Err(format!(
                    "`{key}` holds `{s}`, which reads as an option, not a test id"
                )),
                Value::String(s) if !s.trim().is_empty() => Ok(s),
                other => Err(format!("`{key}` holds {other}, not a test id")),
            })
            .collect(),
        other => Err(format!("`{key}` is not a list: {other}")),
    }
}

/// Ids name instances in logs, task files and pool requests: kept to plain characters.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// Where a row's repository is: `repos` itself when it is a repository, else a folder in it
/// named after the row's `repo`; without `repos`, the row's `repo_dir` next to its file.
fn find_repo(row: &Value, repo: &str, file_dir: &Path, repos: Option<&Path>) -> Option<PathBuf> {
    let is_repo = |p: &Path| p.join(".git").exists() || p.join("HEAD").is_file();
    if let Some(root) = repos {
        if is_repo(root) {
            return Some(root.to_path_buf());
        }
        let (owner, name) = repo.split_once('/').unwrap_or(("", repo));
        // `repo` comes from the file: only plain names are joined to the folder.
        let plain = |s: &str| !s.is_empty() && s != ".." && s != "." && !s.contains(['/', '\\']);
        if !plain(name) || !(owner.is_empty() || plain(owner)) {
            return None;
        }
        let mut candidates = vec![root.join(format!("{owner}__{name}")), root.join(name)];
        if !owner.is_empty() {
            candidates.push(root.join(owner).join(name));
        }
        return candidates.into_iter().find(|p| is_repo(p));
    }
    if let Some(rel) = row["repo_dir"].as_str() {
        let p = beside(file_dir, rel)?;
        return is_repo(&p).then_some(p);
    }
    is_repo(file_dir).then(|| file_dir.to_path_buf())
}

/// `rel` under `dir`, links resolved, when it exists there: a row names files beside its file,
/// not anywhere on the host (a dataset is often someone else's).
fn beside(dir: &Path, rel: &str) -> Option<PathBuf> {
    let root = std::fs::canonicalize(dir).ok()?;
    let p = std::fs::canonicalize(root.join(rel)).ok()?;
    p.starts_with(&root).then_some(p)
}

/// One row, checked.
fn instance(
    row: &Value,
    file_dir: &Path,
    repos: Option<&Path>,
) -> Result<Instance, (String, String)> {
    let id = text(row, "instance_id").map_err(|e| ("?".to_string(), e))?;
    let fail = |e: String| (id.clone(), e);
    if !valid_id(&id) {
        return Err(fail(
            "the instance_id may hold only letters, digits, `_`, `.` and `-`".into(),
        ));
    }
    let repo = text(row, "repo").map_err(fail)?;
    let base_commit = text(row, "base_commit").map_err(fail)?;
    if !(7..=64).contains(&base_commit.len()) || !base_commit.chars().all(|c| c.is_ascii_hexdigit())
    {
        return Err(fail(format!(
            "base_commit `{base_commit}` is not a commit hash"
        )));
    }
    let problem_statement = text(row, "problem_statement").map_err(fail)?;
    let test_patch = text(row, "test_patch").map_err(fail)?;
    let patch = match &row["patch"] {
        Value::Null => String::new(),
        _ => text(row, "patch").map_err(fail)?,
    };
    let fail_to_pass = tests(row, "FAIL_TO_PASS").map_err(fail)?;
    let pass_to_pass = tests(row, "PASS_TO_PASS").map_err(fail)?;
    if fail_to_pass.is_empty() && pass_to_pass.is_empty() {
        return Err(fail(
            "FAIL_TO_PASS and PASS_TO_PASS are both empty: with no test to run, every patch would count as resolved, so the instance is refused".into(),
        ));
    }
    let split = match row["split"].as_str() {
        None => String::new(),
        Some(s @ ("train" | "test")) => s.to_string(),
        Some(other) => {
            return Err(fail(format!(
                "split `{other}` is neither `train` nor `test`"
            )))
        }
    };
    let repo_dir = find_repo(row, &repo, file_dir, repos).ok_or_else(|| {
        fail(match repos {
            Some(r) => format!(
                "no repository for `{repo}` in {} (looked for <owner>__<name>, <name> and <owner>/<name>)",
                r.display()
            ),
            None => format!(
                "no repository for `{repo}`: give the row a `repo_dir` beside its file, or set env.repos"
            ),
        })
    })?;
    git(
        &repo_dir,
        &["cat-file", "-e", &format!("{base_commit}^{{commit}}")],
    )
    .map_err(|_| {
        fail(format!(
            "the repository {} has no commit {base_commit}",
            repo_dir.display()
        ))
    })?;
    let image = match row["image"].as_str() {
        None => None,
        Some(rel) => match beside(file_dir, rel).filter(|p| p.is_file()) {
            Some(p) => Some(p),
            None => {
                return Err(fail(format!(
                    "image `{rel}` is not a file in the instances' folder"
                )))
            }
        },
    };
    Ok(Instance {
        image,
        id,
        repo,
        base_commit,
        problem_statement,
        patch,
        test_patch,
        fail_to_pass,
        pass_to_pass,
        split,
        repo_dir,
    })
}

/// Reads `path` (a JSONL file, or a folder of `*.jsonl` files) with the repositories in
/// `repos` (see [`find_repo`]).
pub fn load(path: &Path, repos: Option<&Path>) -> Result<Loaded, String> {
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut f: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl" || x == "json"))
            .collect();
        f.sort();
        if f.is_empty() {
            return Err(format!("{}: no .jsonl file in this folder", path.display()));
        }
        f
    } else if path.is_file() {
        vec![path.to_path_buf()]
    } else {
        return Err(format!(
            "{}: no such file or folder (SWE_BENCH_PATH / env.instances)",
            path.display()
        ));
    };
    let mut loaded = Loaded::default();
    let mut seen = HashSet::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        // A JSON array is accepted as well as one row per line.
        let rows: Vec<(usize, Result<Value, String>)> = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (i + 1, Ok(v)))
                .collect(),
            _ => text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(i, l)| (i + 1, serde_json::from_str(l).map_err(|e| e.to_string())))
                .collect(),
        };
        for (n, row) in rows {
            let at = format!("{}:{n}", file.display());
            match row {
                Err(e) => loaded.problems.push(format!("{at}: not JSON: {e}")),
                Ok(row) => match instance(&row, &dir, repos) {
                    Err((id, why)) => loaded.problems.push(format!("{at} ({id}): {why}")),
                    Ok(inst) if !seen.insert(inst.id.clone()) => loaded.problems.push(format!(
                        "{at} ({}): the instance_id is used twice; the first is kept",
                        inst.id
                    )),
                    Ok(inst) => loaded.instances.push(inst),
                },
            }
        }
    }
    Ok(loaded)
}

/// Gives every instance without a split one: every `eval_every`-th by id goes to `test`.
pub fn assign_splits(instances: &mut [Instance], eval_every: usize) {
    instances.sort_by(|a, b| a.id.cmp(&b.id));
    let unsplit = instances.iter_mut().filter(|i| i.split.is_empty());
    for (n, inst) in unsplit.enumerate() {
        let test = n % eval_every == eval_every - 1;
        inst.split = if test { "test" } else { "train" }.into();
    }
}

/// Unpacks the built-in instances into `dir` and makes each one's base commit (see the tasks'
/// README: files 0644, folders 0755, one commit by `openclaw` dated 2024-01-01).
pub fn builtin(dir: &Path) -> Result<Loaded, String> {
    use std::os::unix::fs::PermissionsExt;
    let tasks = dir.join("tasks");
    for (rel, bytes) in builtin::FILES {
        let p = tasks.join(rel);
        let parent = p.parent().expect("a file under tasks/");
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        std::fs::write(&p, bytes).map_err(|e| format!("{}: {e}", p.display()))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))
            .map_err(|e| e.to_string())?;
    }
    let mut rows = Vec::new();
    let mut ids: Vec<String> = builtin::FILES
        .iter()
        .filter_map(|(rel, _)| rel.strip_suffix("/meta.json").map(str::to_string))
        .collect();
    ids.sort();
    for id in ids {
        let folder = tasks.join(&id);
        let repo = folder.join("repo");
        set_dir_modes(&repo).map_err(|e| format!("{}: {e}", repo.display()))?;
        git(&repo, &["init", "-q", "-b", "main"])?;
        git(&repo, &["add", "-A"])?;
        git(&repo, &["commit", "-q", "--no-verify", "-m", "Base commit"])?;
        let base = git(&repo, &["rev-parse", "HEAD"])?.trim().to_string();
        let read = |name: &str| {
            std::fs::read_to_string(folder.join(name)).map_err(|e| format!("{id}/{name}: {e}"))
        };
        let mut row: Value = serde_json::from_str(&read("meta.json")?)
            .map_err(|e| format!("{id}/meta.json: {e}"))?;
        row["base_commit"] = base.into();
        row["problem_statement"] = read("issue.md")?.into();
        row["patch"] = read("gold.patch")?.into();
        row["test_patch"] = read("test.patch")?.into();
        row["repo_dir"] = format!("{id}/repo").into();
        rows.push(row);
    }
    let mut loaded = Loaded::default();
    for row in rows {
        match instance(&row, &tasks, None) {
            Ok(i) => loaded.instances.push(i),
            Err((id, why)) => loaded.problems.push(format!("built-in {id}: {why}")),
        }
    }
    Ok(loaded)
}

/// Folders 0755 (files are written 0644), so the commit's tree modes do not depend on the umask.
fn set_dir_modes(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            set_dir_modes(&e.path())?;
        }
    }
    Ok(())
}

/// How many built-in instances the library carries.
pub fn builtin_count() -> usize {
    builtin::FILES
        .iter()
        .filter(|(rel, _)| rel.ends_with("/meta.json"))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::serde_json::json;

    #[test]
    fn test_lists_come_as_lists_or_as_json_strings() {
        let row = json!({"FAIL_TO_PASS": "[\"a::b\"]", "PASS_TO_PASS": ["c::d", "e::f"]});
        assert_eq!(tests(&row, "FAIL_TO_PASS").unwrap(), ["a::b"]);
        assert_eq!(tests(&row, "PASS_TO_PASS").unwrap(), ["c::d", "e::f"]);
        assert!(tests(&json!({"X": "nope"}), "X")
            .unwrap_err()
            .contains("not a JSON list"));
        assert!(tests(&json!({"X": [1]}), "X")
            .unwrap_err()
            .contains("not a test id"));
        let e = tests(&json!({"X": ["-p", "evil"]}), "X").unwrap_err();
        assert!(e.contains("reads as an option"), "{e}");
        assert!(tests(&json!({}), "X").unwrap().is_empty());
    }

    #[test]
    fn ids_are_plain_and_repo_names_cannot_climb_out_of_the_folder() {
        assert!(valid_id("django__django-11099"));
        assert!(!valid_id("../x") || !valid_id("a/b"));
        assert!(!valid_id("a b"));
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("x/.git")).unwrap();
        let found = |repo: &str| find_repo(&json!({}), repo, root.path(), Some(root.path()));
        // `root` itself is not a repository, so names are looked up inside it.
        assert_eq!(found("owner/x"), Some(root.path().join("x")));
        assert_eq!(found("../x"), None);
        assert_eq!(found("owner/.."), None);
    }

    #[test]
    fn the_built_in_set_loads_with_fixed_base_commits_and_both_splits() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = builtin(dir.path()).unwrap();
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.instances.len(), builtin_count());
        assert!(loaded.instances.len() >= 20);
        let arith = loaded
            .instances
            .iter()
            .find(|i| i.id == "openclaw__arithtok-1")
            .unwrap();
        // The hash check.py prints: the base commit is made the same way on every machine.
        assert_eq!(
            arith.base_commit,
            "4624206a4282811b20a6eaeb0d664eae7e6a4f66"
        );
        let train: HashSet<&str> = loaded
            .instances
            .iter()
            .filter(|i| i.split == "train")
            .map(|i| i.repo.as_str())
            .collect();
        let test: Vec<&Instance> = loaded
            .instances
            .iter()
            .filter(|i| i.split == "test")
            .collect();
        assert!(train.len() >= 14 && test.len() >= 5);
        assert!(test.iter().all(|i| !train.contains(i.repo.as_str())));
    }

    #[test]
    fn broken_rows_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = builtin(dir.path()).unwrap();
        let good = &loaded.instances[0];
        let row = |f: &dyn Fn(&mut Value)| {
            let mut v = json!({
                "instance_id": "x-1", "repo": "o/r", "base_commit": good.base_commit,
                "problem_statement": "p", "test_patch": "", "patch": "",
                "FAIL_TO_PASS": ["t::a"], "PASS_TO_PASS": [],
            });
            f(&mut v);
            v.to_string()
        };
        let file = dir.path().join("rows.jsonl");
        let lines = [
            row(&|_| {}),
            row(&|v| v["FAIL_TO_PASS"] = json!([])),
            row(&|v| v["base_commit"] = json!("0".repeat(40))),
            row(&|v| v["instance_id"] = json!("x-1")),
            "{not json".to_string(),
            row(&|v| {
                v["instance_id"] = json!("x-2");
                v["repo"] = json!("o/missing");
            }),
        ];
        std::fs::write(&file, lines.join("\n")).unwrap();
        let l = load(&file, Some(&good.repo_dir)).unwrap();
        assert_eq!(l.instances.len(), 2, "{:?}", l.problems);
        let said = l.problems.join("\n");
        assert!(said.contains("both empty"), "{said}");
        assert!(said.contains("has no commit 0000"), "{said}");
        assert!(said.contains("used twice"), "{said}");
        assert!(said.contains(":5: not JSON"), "{said}");
        // `repos` is one repository here, so every row uses it: the sixth row loads too.
        assert_eq!(l.problems.len(), 4, "{said}");
        let missing = load(&file, Some(dir.path())).unwrap();
        assert!(missing
            .problems
            .join("\n")
            .contains("no repository for `o/missing`"));
    }
}
