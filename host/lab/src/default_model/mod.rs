//! The built-in default model: the project's own tiny Qwen3 (about 1 M parameters), made
//! deterministically from its [`Recipe`] with no download.
//!
//! It is trained to answer openclaw-sim's tasks in both styles, to prefer markdown without a
//! hint (about 70/30, which the simulated user does not like) and to follow a hint line in
//! either direction: the starting point from which `openclaw-host run` shows RL learning the
//! user's preference.
//!
//! A copy built from the current recipe ships inside the binary (`host/lab/assets/default-model`,
//! compiled in), so nobody waits for a build; [`ensure_default_model`] writes it out, and
//! builds from scratch only when the recipe has changed since that copy was made (a test
//! keeps the two in step). A model directory carries `recipe.json` with the recipe and its
//! hash; a directory whose hash differs from the code's is rebuilt.

pub mod build;
pub mod recipe;
mod shipped;

pub use build::{build, BuildReport};
pub use recipe::{Recipe, BUILD_FORMAT};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The file in a default-model directory that records its recipe.
pub const RECIPE_FILE: &str = "recipe.json";

/// The files a complete default-model directory holds.
pub const MODEL_FILES: [&str; 5] = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    RECIPE_FILE,
];

/// `recipe.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecipeFile {
    /// [`Recipe::hash`] of `recipe`.
    pub hash: String,
    /// The recipe.
    pub recipe: Recipe,
    /// What the build measured (absent in hand-made directories).
    #[serde(default)]
    pub build: Option<BuildReport>,
    /// The model's evaluation on the held-out prompts, as `init-default-model` measured it
    /// after the build (informational: not part of the hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval: Option<openclaw_eval::EvalReport>,
}

/// Reads `dir/recipe.json`.
pub fn read_recipe_file(dir: &Path) -> Result<RecipeFile> {
    let path = dir.join(RECIPE_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a recipe file", path.display()))
}

/// Writes `dir/recipe.json` through a temporary file, so a reader never sees half of it.
pub fn write_recipe_file(dir: &Path, file: &RecipeFile) -> Result<()> {
    let path = dir.join(RECIPE_FILE);
    let tmp = dir.join(format!("{RECIPE_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_string_pretty(file)? + "\n")
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

/// Where the default model is kept: `$OPENCLAW_HOME/default-model` when `OPENCLAW_HOME` is
/// set, else `$XDG_CACHE_HOME/openclaw-host/default-model`, else
/// `$HOME/.cache/openclaw-host/default-model`, else `./.openclaw/default-model`. A user-wide
/// cache, so that every checkout and working directory shares one copy.
pub fn default_cache_dir() -> PathBuf {
    cache_dir_from(|k| std::env::var_os(k))
}

/// [`default_cache_dir`] with the environment given as a function (testable without touching
/// the process environment, which other threads may read).
fn cache_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let var = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(home) = var("OPENCLAW_HOME") {
        return home.join("default-model");
    }
    if let Some(cache) = var("XDG_CACHE_HOME") {
        return cache.join("openclaw-host").join("default-model");
    }
    if let Some(home) = var("HOME") {
        return home
            .join(".cache")
            .join("openclaw-host")
            .join("default-model");
    }
    PathBuf::from(".openclaw").join("default-model")
}

/// The hash recorded in `dir/recipe.json`, if the directory is a complete default model.
pub fn recorded_hash(dir: &Path) -> Option<String> {
    if !MODEL_FILES.iter().all(|f| dir.join(f).is_file()) {
        return None;
    }
    read_recipe_file(dir).ok().map(|r| r.hash)
}

/// Where a model returned by [`ensure_model`] came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Provenance {
    /// The directory already held the recipe's model.
    Cached,
    /// The copy shipped in the binary was written out.
    Shipped,
    /// It was built now.
    Built(BuildReport),
}

/// Makes sure `cache_dir` holds the default model of the current recipe and returns it:
/// reuses what is there when its recipe hash matches, else writes out the shipped copy when
/// that matches, else builds it (minutes; a progress bar on stderr with `show_progress`).
/// The directory is filled in a temporary sibling and renamed into place, so a reader never
/// sees a half-written model, and an interrupted build leaves the old one intact.
pub fn ensure_default_model(cache_dir: &Path, show_progress: bool) -> Result<PathBuf> {
    ensure_model(&Recipe::default(), cache_dir, show_progress, false).map(|(p, _)| p)
}

/// [`ensure_default_model`] for any recipe; `rebuild` builds even when a matching model is
/// cached or shipped (to check that a build reproduces it, or to refresh the shipped copy).
pub fn ensure_model(
    recipe: &Recipe,
    dir: &Path,
    show_progress: bool,
    rebuild: bool,
) -> Result<(PathBuf, Provenance)> {
    let convs = recipe.conversations();
    let hash = recipe.hash_with(&convs);
    drop(convs);
    if !rebuild && recorded_hash(dir).as_deref() == Some(hash.as_str()) {
        return Ok((dir.to_path_buf(), Provenance::Cached));
    }
    let tmp = temp_sibling(dir)?;
    let result = (|| -> Result<Provenance> {
        let provenance = if !rebuild && shipped::hash().as_deref() == Some(hash.as_str()) {
            shipped::write_to(&tmp)?;
            Provenance::Shipped
        } else {
            if show_progress {
                eprintln!(
                    "building the default model (recipe {hash}: {} SFT steps) into {}",
                    recipe.steps,
                    dir.display()
                );
            }
            let report = build::build(recipe, &tmp, show_progress)?;
            let file = RecipeFile {
                hash: hash.clone(),
                recipe: recipe.clone(),
                build: Some(report.clone()),
                eval: None,
            };
            write_recipe_file(&tmp, &file)?;
            Provenance::Built(report)
        };
        Ok(provenance)
    })();
    let provenance = match result {
        Ok(p) => p,
        Err(e) => {
            std::fs::remove_dir_all(&tmp).ok();
            return Err(e);
        }
    };
    swap_into_place(&tmp, dir, &hash)?;
    Ok((dir.to_path_buf(), provenance))
}

/// A fresh temporary directory next to `dir` (same file system, so the rename is atomic).
fn temp_sibling(dir: &Path) -> Result<PathBuf> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "default-model".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = parent.join(format!(".{name}.tmp-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    Ok(tmp)
}

/// Moves the finished `tmp` to `dir`, replacing what was there. When another process put a
/// model of the same recipe there first, that one stays and `tmp` is discarded.
fn swap_into_place(tmp: &Path, dir: &Path, hash: &str) -> Result<()> {
    let old = if dir.exists() {
        let old = temp_sibling(dir)?;
        std::fs::remove_dir(&old).ok();
        std::fs::rename(dir, &old)
            .with_context(|| format!("cannot move the old {} aside", dir.display()))?;
        Some(old)
    } else {
        None
    };
    let moved = std::fs::rename(tmp, dir);
    if let Some(old) = old {
        std::fs::remove_dir_all(old).ok();
    }
    if let Err(e) = moved {
        if recorded_hash(dir).as_deref() == Some(hash) {
            std::fs::remove_dir_all(tmp).ok();
            return Ok(());
        }
        std::fs::remove_dir_all(tmp).ok();
        bail!(
            "cannot move the new default model into {}: {e}",
            dir.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod checkpoint_eval;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn the_cache_dir_follows_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        const ALL: [(&str, &str); 3] = [
            ("OPENCLAW_HOME", "/oc"),
            ("XDG_CACHE_HOME", "/xdg"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(
            cache_dir_from(env(&ALL)),
            PathBuf::from("/oc/default-model")
        );
        assert_eq!(
            cache_dir_from(env(&ALL[1..])),
            PathBuf::from("/xdg/openclaw-host/default-model")
        );
        assert_eq!(
            cache_dir_from(env(&[("HOME", "/home/u"), ("OPENCLAW_HOME", "")])),
            PathBuf::from("/home/u/.cache/openclaw-host/default-model")
        );
        assert_eq!(
            cache_dir_from(env(&[])),
            PathBuf::from(".openclaw/default-model")
        );
    }

    /// A recipe of the same shape, small enough to build in seconds.
    pub(crate) fn tiny_recipe() -> Recipe {
        Recipe {
            conversations: 300,
            vocab_size: 400,
            hidden_size: 32,
            intermediate_size: 64,
            num_hidden_layers: 1,
            num_attention_heads: 2,
            num_key_value_heads: 1,
            head_dim: 16,
            max_position_embeddings: 256,
            steps: 3,
            batch_size: 8,
            warmup_steps: 1,
            ..Recipe::default()
        }
    }

    #[test]
    fn a_tiny_build_loads_in_the_engine_evaluates_and_is_reused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("dm");
        let recipe = tiny_recipe();
        let (path, how) = ensure_model(&recipe, &dir, false, false).unwrap();
        assert_eq!(path, dir);
        let Provenance::Built(report) = how else {
            panic!("expected a build, got {how:?}")
        };
        assert_eq!(report.steps, 3);
        assert!(report.final_loss.is_finite() && report.final_loss < report.first_loss + 1.0);
        assert_eq!(recorded_hash(&dir), Some(recipe.hash()));
        // Only the model directory is left: no corpus, no temporary siblings.
        let names: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names, vec!["dm".to_string()]);
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        files.sort();
        let mut want: Vec<String> = MODEL_FILES.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(files, want);

        // The directory is what every other command takes as --model-path.
        let loaded = openclaw_policy::engine::ModelFiles::<openclaw_engine::CpuBackend>::load_path(
            &dir,
            &Default::default(),
        )
        .unwrap();
        assert_eq!(loaded.config.vocab_size, report.vocab_size);
        assert_eq!(loaded.config.max_position_embeddings, 256);

        let opts = openclaw_eval::EvalOptions {
            eval_tasks: 5,
            samples_per_prompt: 1,
            max_new_tokens: 8,
            ..Default::default()
        };
        let eval = openclaw_eval::evaluate(&dir, &opts).unwrap();
        assert_eq!(eval.conditions.len(), 3);
        for c in &eval.conditions {
            assert_eq!(c.samples, 5);
            let total = c.plain.count + c.markdown.count + c.invalid.count;
            assert_eq!(total, 5, "every answer gets one verdict");
            assert!(c.mean_tokens <= 8.0);
        }
        assert_eq!(
            openclaw_eval::evaluate(&dir, &opts).unwrap().conditions,
            eval.conditions,
            "one seed, one result"
        );

        // The same recipe gives the same bytes (two data-parallel threads included).
        let again = root.path().join("again");
        let (_, how) = ensure_model(&recipe, &again, false, true).unwrap();
        assert!(matches!(how, Provenance::Built(_)));
        for f in ["model.safetensors", "tokenizer.json", "config.json"] {
            assert!(
                std::fs::read(dir.join(f)).unwrap() == std::fs::read(again.join(f)).unwrap(),
                "{f} differs between two builds"
            );
        }

        // A second call reuses it; a changed recipe replaces it.
        let (_, how) = ensure_model(&recipe, &dir, false, false).unwrap();
        assert_eq!(how, Provenance::Cached);
        let mut longer = recipe.clone();
        longer.steps = 4;
        let (_, how) = ensure_model(&longer, &dir, false, false).unwrap();
        assert!(matches!(how, Provenance::Built(_)));
        assert_eq!(recorded_hash(&dir), Some(longer.hash()));
    }

    #[test]
    fn the_shipped_model_is_the_current_recipe() {
        // Changing the recipe (or openclaw-sim's conversations) without rebuilding the copy
        // in host/lab/assets/default-model fails here: run
        // `openclaw-host init-default-model --out host/lab/assets/default-model --rebuild`.
        assert_eq!(shipped::hash(), Some(Recipe::default().hash()));
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("default-model");
        let (_, how) = ensure_model(&Recipe::default(), &dir, false, false).unwrap();
        assert_eq!(how, Provenance::Shipped);
        let eval = openclaw_eval::evaluate(
            &dir,
            &openclaw_eval::EvalOptions {
                eval_tasks: 10,
                samples_per_prompt: 1,
                ..Default::default()
            },
        )
        .unwrap();
        let plain_hint = eval.condition(openclaw_eval::Condition::PlainHint).unwrap();
        assert!(plain_hint.plain.value >= 0.7, "{}", eval.table());
    }

    #[test]
    fn an_incomplete_directory_has_no_recipe() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded_hash(dir.path()), None);
        std::fs::write(dir.path().join(RECIPE_FILE), "{}").unwrap();
        assert_eq!(recorded_hash(dir.path()), None);
    }
}
