//! `plugins new`: a plugin crate that builds, loads and passes the contract harness as written,
//! the `cargo new --lib` path with the plugin parts filled in.

use anyhow::{bail, Context, Result};
use openclaw_plugin_api::PluginKind;
use std::path::{Path, PathBuf};

/// What to scaffold.
#[derive(Clone, Debug)]
pub struct NewPlugin {
    /// The plugin's (and crate's) name.
    pub name: String,
    /// The kinds to include.
    pub kinds: Vec<PluginKind>,
    /// The folder to create the crate in (the crate is `dir/name`).
    pub dir: PathBuf,
}

/// Checks that `name` can be a crate name and a plugin name.
pub fn validate_name(name: &str) -> Result<()> {
    let ok_start = name.chars().next().is_some_and(|c| c.is_ascii_lowercase());
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok_start || !ok_chars {
        bail!(
            "invalid plugin name `{name}`: use lowercase letters, digits, `-` and `_`, starting with a letter"
        );
    }
    Ok(())
}

/// Writes the crate and returns its directory.
pub fn create(spec: &NewPlugin) -> Result<PathBuf> {
    validate_name(&spec.name)?;
    if spec.kinds.is_empty() {
        bail!("no kinds given (use --kind loss,reward,...)");
    }
    let root = spec.dir.join(&spec.name);
    if root.exists() {
        bail!(
            "{} already exists; choose another name or --dir",
            root.display()
        );
    }
    std::fs::create_dir_all(root.join("src"))
        .with_context(|| format!("cannot create {}", root.display()))?;
    let write = |rel: &str, text: String| -> Result<()> {
        let p = root.join(rel);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    write("Cargo.toml", cargo_toml(&spec.name, false))?;
    write("plugin.toml", plugin_toml(spec))?;
    write("config.toml", config_toml(spec))?;
    write("README.md", readme(spec))?;
    write(".gitignore", "/target\n".into())?;
    write("src/lib.rs", lib_rs(spec))?;
    for kind in &spec.kinds {
        write(&format!("src/{}.rs", kind.as_str()), module_rs(*kind))?;
    }
    // A crate created inside another workspace that does not list it needs its own
    // `[workspace]` table, or cargo refuses to build it.
    if !cargo_accepts(&root) {
        write("Cargo.toml", cargo_toml(&spec.name, true))?;
    }
    Ok(root)
}

fn cargo_accepts(root: &Path) -> bool {
    crate::build::metadata_command(&root.join("Cargo.toml"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How the new crate depends on the plugin API: the source tree the host was built from when
/// it is still there, else the published version.
fn api_dependency() -> String {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugin-api");
    match source.canonicalize() {
        Ok(p) => format!(
            "openclaw-plugin-api = {{ path = {:?} }}",
            p.display().to_string()
        ),
        Err(_) => format!(
            "openclaw-plugin-api = \"{}\"",
            openclaw_plugin_api::API_VERSION
        ),
    }
}

fn cargo_toml(name: &str, own_workspace: bool) -> String {
    let ws = if own_workspace {
        "\n# This crate is its own workspace.\n[workspace]\n"
    } else {
        ""
    };
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2021"

[lib]
# cdylib: the library openclaw-host loads; rlib: lets tests and benches call it directly.
crate-type = ["cdylib", "rlib"]

[dependencies]
{api}

# Dependencies optimised even in debug builds: the host calls this library in hot loops.
[profile.dev.package."*"]
opt-level = 3
{ws}"#,
        api = api_dependency()
    )
}

fn kinds_array(spec: &NewPlugin) -> String {
    spec.kinds
        .iter()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plugin_toml(spec: &NewPlugin) -> String {
    format!(
        "[plugin]\nname = \"{}\"\nversion = \"0.1.0\"\nkinds = [{}]\ndescription = \"{}\"\n",
        spec.name,
        kinds_array(spec),
        description(spec)
    )
}

fn description(spec: &NewPlugin) -> String {
    format!(
        "A new method ({})",
        spec.kinds
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn config_toml(spec: &NewPlugin) -> String {
    let mut out =
        String::from("# Default configuration; the host passes the user's overrides merged in.\n");
    for k in &spec.kinds {
        out.push_str(match k {
            PluginKind::Loss => include_str!("../templates/config/loss.toml"),
            PluginKind::Reward => include_str!("../templates/config/reward.toml"),
            PluginKind::Rollout => include_str!("../templates/config/rollout.toml"),
            PluginKind::Generate => include_str!("../templates/config/generate.toml"),
            PluginKind::Env => include_str!("../templates/config/env.toml"),
        });
    }
    out
}

fn readme(spec: &NewPlugin) -> String {
    format!(
        "# {name}\n\n{desc}.\n\nBuild, load and check it:\n\n```\nopenclaw-host plugins test {name}\n```\n\nUse it in a run with `--plugin <this folder>`, or replace one kind of another method with\n`--custom-loss-function-path <this folder>` (and `--custom-rm-path`, `--rollout-function-path`,\n`--custom-generate-function-path`). Defaults live in `config.toml`.\n",
        name = spec.name,
        desc = description(spec)
    )
}

fn lib_rs(spec: &NewPlugin) -> String {
    let mods: String = spec
        .kinds
        .iter()
        .map(|k| format!("pub mod {};\n", k.as_str()))
        .collect();
    let kinds: String = spec
        .kinds
        .iter()
        .map(|k| {
            let ty = match k {
                PluginKind::Loss => "loss::MyLoss",
                PluginKind::Reward => "reward::MyReward",
                PluginKind::Rollout => "rollout::MyRollout",
                PluginKind::Generate => "generate::MyGenerate",
                PluginKind::Env => "env::MyEnv",
            };
            format!("    {k}: {ty},\n")
        })
        .collect();
    format!(
        "//! {name}: an openclaw-host plugin.\n\n{mods}\nopenclaw_plugin_api::export_plugin! {{\n    name: \"{name}\",\n    description: \"{desc}\",\n    default_config: include_str!(\"../config.toml\"),\n{kinds}}}\n",
        name = spec.name,
        desc = description(spec),
    )
}

fn module_rs(kind: PluginKind) -> String {
    match kind {
        PluginKind::Loss => LOSS_TEMPLATE,
        PluginKind::Reward => REWARD_TEMPLATE,
        PluginKind::Rollout => ROLLOUT_TEMPLATE,
        PluginKind::Generate => GENERATE_TEMPLATE,
        PluginKind::Env => ENV_TEMPLATE,
    }
    .to_string()
}

const LOSS_TEMPLATE: &str = include_str!("../templates/src/loss.rs");

const REWARD_TEMPLATE: &str = include_str!("../templates/src/reward.rs");

const ROLLOUT_TEMPLATE: &str = include_str!("../templates/src/rollout.rs");

const GENERATE_TEMPLATE: &str = include_str!("../templates/src/generate.rs");

const ENV_TEMPLATE: &str = include_str!("../templates/src/env.rs");
