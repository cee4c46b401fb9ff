//! `openclaw-host plugins ...`.

use super::{IndexFlags, PluginsCommand};
use anyhow::{bail, Context, Result};
use openclaw_marketplace::index::Record;
use openclaw_marketplace::package::{PackageOptions, PackageSource};
use openclaw_marketplace::settings::Settings;
use openclaw_marketplace::sign::Checked;
use openclaw_marketplace::{ChooseOptions, Found, Marketplace};
use openclaw_plugins::build::{CrateLibrary, Freshness};
use openclaw_plugins::install::{self as installer, InstallOptions, Updated};
use openclaw_plugins::installed::{self, Installed};
use openclaw_plugins::load::kind_list;
use openclaw_plugins::scaffold::{self, NewPlugin};
use openclaw_plugins::{discover, harness, LoadedPlugin, PluginToml};
use std::path::PathBuf;

pub fn run(cmd: PluginsCommand) -> Result<i32> {
    match cmd {
        PluginsCommand::List {
            installed: true, ..
        } => list_installed(),
        PluginsCommand::List { dirs, .. } => list(dirs),
        PluginsCommand::Info { plugin, index } => info(&plugin, &index),
        PluginsCommand::Search { term, index } => search(&term, &index),
        PluginsCommand::Install {
            source,
            rev,
            subdir,
            force,
            allow_yanked,
            index,
        } => install(
            &source,
            &InstallOptions {
                force,
                reference: rev.unwrap_or_default(),
                subdir: subdir.unwrap_or_default(),
                ..Default::default()
            },
            ChooseOptions { allow_yanked },
            &index,
        ),
        PluginsCommand::Remove { plugin } => remove(&plugin),
        PluginsCommand::Update { names, index } => update(names, &index),
        PluginsCommand::Package {
            dir,
            git,
            rev,
            archive,
            key,
            index_file,
        } => package(
            &dir,
            &PackageOptions {
                source: if archive {
                    PackageSource::Archive
                } else {
                    PackageSource::Git {
                        url: git.unwrap_or_default(),
                        rev: rev.unwrap_or_default(),
                    }
                },
                key,
                index_file,
            },
        ),
        PluginsCommand::Keygen { prefix } => keygen(&prefix),
        PluginsCommand::Yank {
            plugin,
            index_file,
            key,
            undo,
        } => {
            let Some((name, version)) = installed::split_pinned(&plugin) else {
                bail!("`{plugin}`: yank names one version, NAME@VERSION");
            };
            let r = openclaw_marketplace::package::yank(
                &index_file,
                name,
                version,
                !undo,
                key.as_deref(),
            )?;
            println!(
                "{} is {} in {}",
                r.id(),
                if r.yanked { "yanked" } else { "not yanked" },
                index_file.display()
            );
            Ok(0)
        }
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

fn list_installed() -> Result<i32> {
    let root = installed::plugin_dir();
    let all = installed::list(&root);
    if all.is_empty() {
        println!("no plugins installed in {}", root.display());
        return Ok(0);
    }
    println!("installed in {}", root.display());
    let mut rows = vec![[
        "NAME".to_string(),
        "VERSION".into(),
        "KINDS".into(),
        "PLUGIN API".into(),
        "SOURCE".into(),
    ]];
    for i in all {
        let r = i.record;
        rows.push([
            r.name,
            r.version,
            r.kinds.join(", "),
            r.plugin_api,
            r.source.describe(),
        ]);
    }
    print_table(&rows);
    Ok(0)
}

/// Whether `spec` names a plugin (`NAME` or `NAME@VERSION`) rather than a path, a library or
/// a git URL.
fn is_name(spec: &str) -> bool {
    let (name, _) = installed::name_and_version(spec);
    // `git@host:owner/repo` is a URL, and no name or version holds a `:`.
    !spec.contains('/')
        && !spec.contains(':')
        && !std::path::Path::new(spec).exists()
        && installed::check_component("name", name).is_ok()
}

fn install(
    spec: &str,
    opts: &InstallOptions,
    choose: ChooseOptions,
    index: &IndexFlags,
) -> Result<i32> {
    let root = installed::plugin_dir();
    if is_name(spec) {
        let (name, version) = installed::name_and_version(spec);
        let settings = Settings::load(&index.flags())?;
        if !settings.indexes.is_empty() {
            let market = Marketplace::open(settings)?;
            // A name no index lists may still be a crate of the project; one an index lists
            // is that index's, refusals included.
            if version.is_some() || market.lists(name) || discover::find_crate(name)?.is_none() {
                let found = market.choose(name, version, choose)?;
                say_found(&found);
                let done = market.install(&root, &found, opts.force)?;
                say_installed(&done);
                return Ok(0);
            }
        } else if let Some(v) = version {
            bail!(
                "{name}@{v} names a version in a plugin index, and none is configured: give --index PATH|URL, or list `indexes` in {}",
                openclaw_marketplace::settings::settings_path().display()
            );
        }
    }
    let from = installer::parse_source(spec, opts)?;
    let done = installer::install(&root, &from, opts)?;
    say_installed(&done);
    Ok(0)
}

fn say_found(found: &Found) {
    let r = &found.record;
    println!("{} from the index {}", r.id(), found.index.display());
    match &found.signature {
        Checked::Trusted(key) => println!("  signature: verified with the trusted key {key}"),
        Checked::Unchecked => println!(
            "  signature: present, not checked (no trusted key; --trusted-key KEY checks it)"
        ),
        Checked::Unsigned => println!("  signature: none"),
    }
    for line in r.permission_lines() {
        println!("  declares: {line}");
    }
}

fn search(term: &str, index: &IndexFlags) -> Result<i32> {
    let market = Marketplace::open(Settings::load(&index.flags())?)?;
    let trusted = market.settings.trusted_keys.clone();
    let hits = market.search(term);
    if hits.is_empty() {
        println!("no plugin in the indexes matches `{term}`");
        return Ok(0);
    }
    let mut rows = vec![[
        "NAME".to_string(),
        "VERSION".into(),
        "KINDS".into(),
        "PLUGIN API".into(),
        "SIGNED".into(),
        "DESCRIPTION".into(),
    ]];
    let mut seen: Vec<&str> = Vec::new();
    for (_, r) in hits {
        // The newest version that is not yanked stands for its name.
        if seen.contains(&r.name.as_str()) || r.yanked {
            continue;
        }
        seen.push(&r.name);
        rows.push([
            r.name.clone(),
            r.version.clone(),
            r.kinds.join(", "),
            r.plugin_api.clone(),
            match openclaw_marketplace::sign::check(r, &trusted) {
                Ok(Checked::Trusted(_)) => "verified",
                Ok(Checked::Unchecked) => "unchecked",
                Ok(Checked::Unsigned) => "no",
                Err(_) => "BAD",
            }
            .into(),
            r.description.clone(),
        ]);
    }
    print_table(&rows);
    Ok(0)
}

fn print_record(found: &Found) {
    let r: &Record = &found.record;
    println!("name:        {}", r.name);
    println!(
        "version:     {}{}",
        r.version,
        if r.yanked { " (yanked)" } else { "" }
    );
    println!("description: {}", r.description);
    println!("kinds:       {}", r.kinds.join(", "));
    println!(
        "plugin API:  {} (this host: {})",
        r.plugin_api,
        openclaw_plugin_api::API_VERSION
    );
    println!("source:      {}", r.source.describe());
    println!("checksum:    {}", r.checksum);
    println!("index:       {}", found.index.display());
    if !r.smoke.is_empty() {
        println!("checked:     {}", r.smoke);
    }
    let signed = match &found.signature {
        Checked::Trusted(k) => format!("yes, by the trusted key {k}"),
        Checked::Unchecked => "yes, not checked (no trusted key)".into(),
        Checked::Unsigned => "no".into(),
    };
    println!("signed:      {signed}");
    println!("permissions:");
    for line in r.permission_lines() {
        println!("  {line}");
    }
    println!("  (an installed plugin runs as native code with this host's rights)");
}

fn package(dir: &std::path::Path, opts: &PackageOptions) -> Result<i32> {
    let record = openclaw_marketplace::package::package(dir, opts)?;
    match &opts.index_file {
        Some(f) => println!("{} written into {}", record.id(), f.display()),
        None => {
            let mut index = openclaw_marketplace::index::Index::new();
            index.put(record);
            print!("{}", index.to_toml());
        }
    }
    Ok(0)
}

fn keygen(prefix: &std::path::Path) -> Result<i32> {
    let (public, secret, public_file) = openclaw_marketplace::sign::keygen(prefix)?;
    println!(
        "secret key: {} (keep it private; it is not encrypted)",
        secret.display()
    );
    println!("public key: {}", public_file.display());
    println!("trust it with: --trusted-key {public}");
    Ok(0)
}

fn say_installed(i: &Installed) {
    let r = &i.record;
    println!(
        "installed {} ({}; plugin API {}) in {}",
        i.id(),
        r.kinds.join(", "),
        r.plugin_api,
        i.dir.display()
    );
    println!("  from    {}", r.source.describe());
    println!("  library sha256 {}", r.library_sha256);
    if !r.source_sha256.is_empty() {
        println!("  source  sha256 {}", r.source_sha256);
    }
    // What installing means, said once where it happens.
    println!("  it runs as native code with this host's rights (environments run their tasks' commands in the sandbox; a plugin's own code does not)");
}

fn remove(spec: &str) -> Result<i32> {
    let root = installed::plugin_dir();
    let (name, version) = installed::name_and_version(spec);
    for i in installed::remove(&root, name, version)? {
        println!("removed {} ({})", i.id(), i.dir.display());
    }
    Ok(0)
}

fn update(names: Vec<String>, index: &IndexFlags) -> Result<i32> {
    let root = installed::plugin_dir();
    let names = if names.is_empty() {
        let mut all: Vec<String> = installed::list(&root)
            .into_iter()
            .map(|i| i.record.name)
            .collect();
        all.dedup();
        if all.is_empty() {
            println!("no plugins installed in {}", root.display());
            return Ok(0);
        }
        all
    } else {
        names
    };
    let mut failed = 0;
    for name in &names {
        let newest = installed::find(&root, name, None)?;
        if let Some(current) = newest.filter(|i| !i.record.index.is_empty()) {
            match update_from_index(&root, &current, index) {
                Ok(()) => {}
                Err(e) => {
                    eprintln!("error: {name}: {e:#}");
                    failed += 1;
                }
            }
            continue;
        }
        match installer::update(&root, name) {
            Ok(Updated::New { from, to }) => {
                println!("{name}: {from} -> {} ({from} is still installed)", to.record.version);
                say_installed(&to);
            }
            Ok(Updated::Current(i)) => println!(
                "{name}: {} is the newest version at {}",
                i.record.version,
                i.record.source.describe()
            ),
            Ok(Updated::Fixed(i)) => println!(
                "{name}: {} was installed from a library file; install a newer library to update it",
                i.record.version
            ),
            Err(e) => {
                eprintln!("error: {name}: {e:#}");
                failed += 1;
            }
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// Installs the newest version an index lists when it is newer than `current`: from the
/// index `current` came from (unless `--index` names others), signed by the key that signed
/// `current` when one did.
fn update_from_index(
    root: &std::path::Path,
    current: &Installed,
    index: &IndexFlags,
) -> Result<()> {
    let mut flags = index.flags();
    if flags.indexes.is_empty() {
        flags.indexes = vec![current.record.index.clone()];
    }
    if !current.record.signed_by.is_empty() {
        flags.trusted_keys.push(current.record.signed_by.clone());
        flags.only_signed = true;
    }
    let settings = Settings::load(&flags)?;
    let market = Marketplace::open(settings)?;
    let name = &current.record.name;
    let found = market.choose(name, None, ChooseOptions::default())?;
    let signed_by = &current.record.signed_by;
    if !signed_by.is_empty() && found.signature != Checked::Trusted(signed_by.clone()) {
        bail!(
            "{} is not signed by the key that signed {} ({signed_by})",
            found.record.id(),
            current.id()
        );
    }
    if installed::compare_versions(&found.record.version, &current.record.version)
        != std::cmp::Ordering::Greater
    {
        println!(
            "{name}: {} is the newest version in {}",
            current.record.version,
            found.index.display()
        );
        return Ok(());
    }
    say_found(&found);
    let to = market.install(root, &found, false)?;
    println!(
        "{name}: {} -> {} ({} is still installed)",
        current.record.version, to.record.version, current.record.version
    );
    say_installed(&to);
    Ok(())
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

fn info(spec: &str, index: &IndexFlags) -> Result<i32> {
    let p = match open(spec) {
        Ok(p) => p,
        Err(e) if is_name(spec) => {
            // Not here or installed: the indexes may list it.
            let settings = Settings::load(&index.flags())?;
            if settings.indexes.is_empty() {
                return Err(e);
            }
            let (name, version) = installed::name_and_version(spec);
            let market = Marketplace::open(settings)?;
            let found = market
                .choose(name, version, ChooseOptions { allow_yanked: true })
                .map_err(|ie| anyhow::anyhow!("{e:#}; and in the indexes: {ie:#}"))?;
            print_record(&found);
            return Ok(0);
        }
        Err(e) => return Err(e),
    };
    let m = &p.manifest;
    println!("name:        {}", m.name);
    println!("version:     {}", m.version);
    println!("description: {}", m.description);
    println!("kinds:       {}", kind_list(&p.kinds));
    if let Some(dir) = &p.crate_dir {
        println!("crate:       {}", dir.display());
    }
    println!("library:     {}", p.library.display());
    let record = p
        .library
        .parent()
        .filter(|d| installed::is_installed_dir(d))
        .map(Installed::read)
        .transpose()?;
    if let Some(i) = &record {
        println!("installed:   {}", i.dir.display());
        println!("source:      {}", i.record.source.describe());
    }
    println!(
        "plugin API:  {} (this host: {})",
        installed::built_against(&p.library)?,
        openclaw_plugin_api::API_VERSION
    );
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
