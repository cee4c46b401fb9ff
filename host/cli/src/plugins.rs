//! `openclaw-host plugins ...`.

use super::PluginsCommand;
use anyhow::{bail, Context, Result};
use openclaw_plugins::build::{CrateLibrary, Freshness};
use openclaw_plugins::load::kind_list;
use openclaw_plugins::scaffold::{self, NewPlugin};
use openclaw_plugins::{discover, harness, LoadedPlugin, PluginToml};
use std::path::PathBuf;

pub fn run(cmd: PluginsCommand) -> Result<i32> {
    match cmd {
        PluginsCommand::List { dirs } => list(dirs),
        PluginsCommand::Info { plugin } => info(&plugin),
        PluginsCommand::New { name, kind, dir } => new(name, kind, dir),
        PluginsCommand::Test { plugin, config } => test(&plugin, config),
    }
}

fn list(dirs: Vec<PathBuf>) -> Result<i32> {
    let roots = if dirs.is_empty() {
        discover::search_path()
    } else {
        for d in &dirs {
            if !d.exists() {
                bail!("{} does not exist", d.display());
            }
        }
        dirs
    };
    let mut rows = vec![[
        "NAME".to_string(),
        "VERSION".into(),
        "KINDS".into(),
        "BUILT".into(),
        "PATH".into(),
    ]];
    let mut problems = 0;
    for root in &roots {
        for dir in discover::crates_in(root) {
            let toml = match PluginToml::read(&dir) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("warning: skipping {}: {e:#}", dir.display());
                    problems += 1;
                    continue;
                }
            };
            let built = match CrateLibrary::locate(&dir) {
                Ok(lib) => match lib.freshness() {
                    Freshness::Fresh => "yes",
                    Freshness::Stale => "stale",
                    Freshness::Missing => "no",
                },
                Err(e) => {
                    eprintln!("warning: {}: {e:#}", dir.display());
                    "unknown"
                }
            };
            rows.push([
                toml.name,
                toml.version,
                kind_list(&toml.kinds),
                built.into(),
                dir.display().to_string(),
            ]);
        }
    }
    if rows.len() == 1 {
        println!(
            "no plugins found in {}",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(if problems > 0 { 1 } else { 0 });
    }
    print_table(&rows);
    Ok(0)
}

fn print_table<const N: usize>(rows: &[[String; N]]) {
    let mut widths = [0usize; N];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i + 1 == N {
                    c.clone()
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        println!("{}", line.join("  "));
    }
}

fn open(spec: &str) -> Result<LoadedPlugin> {
    let path = discover::resolve(spec)?;
    LoadedPlugin::open(&path)
}

fn info(spec: &str) -> Result<i32> {
    let p = open(spec)?;
    let m = &p.manifest;
    println!("name:        {}", m.name);
    println!("version:     {}", m.version);
    println!("description: {}", m.description);
    println!("kinds:       {}", kind_list(&p.kinds));
    if let Some(dir) = &p.crate_dir {
        println!("crate:       {}", dir.display());
    }
    println!("library:     {}", p.library.display());
    println!("plugin API:  {}", openclaw_plugin_api::API_VERSION);
    println!("default config:");
    let cfg = m.default_config.trim_end();
    if cfg.is_empty() {
        println!("  (none)");
    } else {
        for line in cfg.lines() {
            println!("  {line}");
        }
    }
    Ok(0)
}

fn new(name: String, kinds: Vec<openclaw_plugin_api::PluginKind>, dir: PathBuf) -> Result<i32> {
    let root = scaffold::create(&NewPlugin {
        name: name.clone(),
        kinds,
        dir,
    })?;
    println!("created plugin crate {}", root.display());
    println!("check it:   openclaw-host plugins test {}", root.display());
    println!("use it:     openclaw-host run --plugin {}", root.display());
    Ok(0)
}

fn test(spec: &str, config: Option<PathBuf>) -> Result<i32> {
    let p = open(spec)?;
    let config = match config {
        Some(path) => Some(
            std::fs::read_to_string(&path)
                .with_context(|| format!("cannot read config file {}", path.display()))?,
        ),
        None => None,
    };
    println!(
        "checking plugin `{}` {} ({})",
        p.name(),
        p.manifest.version,
        p.origin().display()
    );
    let checks = harness::run(&p, config.as_deref());
    let mut failed = 0;
    for c in &checks {
        let mark = if c.passed { "ok  " } else { "FAIL" };
        if !c.passed {
            failed += 1;
        }
        if c.detail.is_empty() {
            println!("  {mark}  {}: {}", c.kind, c.what);
        } else {
            println!("  {mark}  {}: {} ({})", c.kind, c.what, c.detail);
        }
    }
    println!("{} checks passed, {} failed", checks.len() - failed, failed);
    Ok(if failed == 0 { 0 } else { 1 })
}
