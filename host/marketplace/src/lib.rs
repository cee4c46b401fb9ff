//! Plugin indexes: where plugins are found by name. An index is a TOML file (a path or an
//! HTTPS URL) with one record per plugin version: its kinds, the plugin API versions it loads
//! under, the permissions it declares, its source (a git commit, an archive or a built
//! library), the checksum of that source, a yanked flag, and a minisign signature. Installing
//! by name picks a record, checks its signature and its checksum, and hands the source to the
//! installed-plugins directory (`openclaw_plugins::install`).

pub mod archive;
pub mod fetch;
pub mod index;
pub mod package;
pub mod settings;
pub mod sign;

use anyhow::{anyhow, bail, Context, Result};
use fetch::Location;
use index::{Index, Record, SourceKind};
use openclaw_plugin_api::API_VERSION;
use openclaw_plugins::install::{self as installer, InstallFrom, InstallOptions};
use openclaw_plugins::installed::{self, Installed, Provenance, Source};
use settings::Settings;
use sign::Checked;
use std::path::Path;

/// The indexes of a session, loaded.
pub struct Marketplace {
    /// What was configured.
    pub settings: Settings,
    /// Each index with where it was read from, in the configured order.
    pub indexes: Vec<(Location, Index)>,
}

/// A record chosen from an index.
#[derive(Clone, Debug)]
pub struct Found {
    /// The index it is in.
    pub index: Location,
    /// The record.
    pub record: Record,
    /// What its signature check found.
    pub signature: Checked,
}

/// How to choose.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChooseOptions {
    /// Take a yanked version too.
    pub allow_yanked: bool,
}

impl Marketplace {
    /// Loads every configured index. One that cannot be read or parsed is an error naming it.
    pub fn open(settings: Settings) -> Result<Marketplace> {
        if settings.indexes.is_empty() {
            bail!(
                "no plugin index is configured: give --index PATH|URL, or list `indexes` in {}",
                settings::settings_path().display()
            );
        }
        let policy = settings.policy();
        let mut indexes = Vec::new();
        for at in &settings.indexes {
            let loc = Location::parse(at);
            let bytes = fetch::fetch(&loc, &policy, fetch::INDEX_LIMIT)
                .with_context(|| format!("reading the index {at}"))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| anyhow!("the index {at} is not UTF-8 text"))?;
            let (index, skipped) = Index::parse_lenient(&text, at)?;
            for s in skipped {
                tracing::warn!("index {at}: left out {s}");
            }
            // A local index is named by its absolute path, so the record kept with an
            // installed plugin finds it again from any folder.
            let loc = match loc {
                Location::Path(p) => Location::Path(std::path::absolute(&p).unwrap_or(p)),
                url => url,
            };
            indexes.push((loc, index));
        }
        Ok(Marketplace { settings, indexes })
    }

    /// Every record whose name or description holds `term` (case-insensitive), newest version
    /// of each name first, with the index it is in.
    pub fn search(&self, term: &str) -> Vec<(&Location, &Record)> {
        let term = term.to_lowercase();
        let mut out: Vec<(&Location, &Record)> = Vec::new();
        for (loc, index) in &self.indexes {
            for r in &index.records {
                let hit = r.name.to_lowercase().contains(&term)
                    || r.description.to_lowercase().contains(&term);
                if hit
                    && !out
                        .iter()
                        .any(|(_, o)| o.name == r.name && o.version == r.version)
                {
                    out.push((loc, r));
                }
            }
        }
        out.sort_by(|(_, a), (_, b)| {
            a.name
                .cmp(&b.name)
                .then_with(|| installed::compare_versions(&b.version, &a.version))
        });
        out
    }

    /// The record `name` and `wanted` (a version or a requirement; the newest when `None`)
    /// pick: not yanked unless allowed, loading under this host's plugin API, and signed by a
    /// trusted key when only signed records are accepted. Each refusal names its reason.
    pub fn choose(&self, name: &str, wanted: Option<&str>, opts: ChooseOptions) -> Result<Found> {
        // The first index that lists a name owns it: a later index cannot shadow a plugin
        // with a higher version.
        let mut all: Vec<(&Location, &Record)> = Vec::new();
        if let Some((loc, index)) = self
            .indexes
            .iter()
            .find(|(_, i)| i.records.iter().any(|r| r.name == name))
        {
            all.extend(
                index
                    .records
                    .iter()
                    .filter(|r| r.name == name)
                    .map(|r| (loc, r)),
            );
        }
        if all.is_empty() {
            bail!(
                "no plugin named `{name}` in the indexes ({})",
                self.index_names()
            );
        }
        all.sort_by(|(_, a), (_, b)| installed::compare_versions(&a.version, &b.version));
        let versions = || {
            all.iter()
                .map(|(_, r)| {
                    if r.yanked {
                        format!("{} (yanked)", r.version)
                    } else {
                        r.version.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut matching = Vec::new();
        for (loc, r) in &all {
            let hit = match wanted {
                // With no version asked for, a pre-release is not the newest.
                None => semver::Version::parse(&r.version).is_ok_and(|v| v.pre.is_empty()),
                Some(w) => installed::version_matches(&r.version, w)?,
            };
            if hit {
                matching.push((*loc, *r));
            }
        }
        let Some(&(_, newest)) = matching.last() else {
            bail!(
                "{name}@{} is not in the indexes (versions there: {})",
                wanted.unwrap_or("*"),
                versions()
            );
        };
        let unyanked: Vec<(&Location, &Record)> = matching
            .iter()
            .copied()
            .filter(|(_, r)| opts.allow_yanked || !r.yanked)
            .collect();
        if unyanked.is_empty() {
            bail!(
                "{} is yanked (withdrawn by its publisher); --allow-yanked installs it anyway",
                newest.id()
            );
        }
        let mut fitting = Vec::new();
        for (loc, r) in &unyanked {
            if r.supports_api(API_VERSION)? {
                fitting.push((*loc, *r));
            }
        }
        let Some(&(loc, record)) = fitting.last() else {
            let (_, r) = unyanked.last().expect("not empty");
            bail!(
                "{} loads under plugin API {}, and this host has plugin API {API_VERSION}",
                r.id(),
                r.plugin_api
            );
        };
        let signature = sign::check(record, &self.settings.trusted_keys)
            .with_context(|| format!("in the index {}", loc.display()))?;
        if self.settings.only_signed {
            match &signature {
                Checked::Trusted(_) => {}
                Checked::Unsigned => bail!(
                    "{} in the index {} is not signed, and only signed records are accepted (--only-signed, or only_signed in the settings)",
                    record.id(),
                    loc.display()
                ),
                Checked::Unchecked => bail!(
                    "{} is signed, and no key is trusted to check it with; only signed records are accepted: give --trusted-key KEY or list `trusted_keys` in the settings",
                    record.id()
                ),
            }
        }
        Ok(Found {
            index: loc.clone(),
            record: record.clone(),
            signature,
        })
    }

    /// Whether an index lists a plugin of this name.
    pub fn lists(&self, name: &str) -> bool {
        self.indexes
            .iter()
            .any(|(_, i)| i.records.iter().any(|r| r.name == name))
    }

    fn index_names(&self) -> String {
        self.indexes
            .iter()
            .map(|(l, _)| l.display())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Installs a chosen record into `root`: its source fetched, its checksum checked before
    /// anything is built or loaded, and the plugin that results checked to be the one the
    /// record names.
    pub fn install(&self, root: &Path, found: &Found, force: bool) -> Result<Installed> {
        let r = &found.record;
        let signed_by = match &found.signature {
            Checked::Trusted(key) => key.clone(),
            _ => String::new(),
        };
        let expect = Some((r.name.clone(), r.version.clone()));
        if r.kinds.iter().any(|k| k == "data") {
            bail!(
                "{} is a data package (a task set); this host does not install data packages yet: fetch {} by hand",
                r.id(),
                r.source.describe()
            );
        }
        let policy = self.settings.policy();
        let index = found.index.display();
        let done = match r.source.kind()? {
            SourceKind::Git => {
                let plain = ["http://", "git://"]
                    .iter()
                    .any(|p| r.source.git.starts_with(p));
                if plain && !policy.allow_http {
                    bail!(
                        "{}: its git source {} is not encrypted; --allow-http permits it",
                        r.id(),
                        r.source.git
                    );
                }
                let opts = InstallOptions {
                    force,
                    reference: r.source.rev.clone(),
                    subdir: r.source.subdir.clone(),
                    expect_source_sha256: r.checksum.clone(),
                    index: index.clone(),
                    signed_by: signed_by.clone(),
                    expect: expect.clone(),
                };
                let from = InstallFrom::Git {
                    url: r.source.git.clone(),
                    reference: r.source.rev.clone(),
                    subdir: r.source.subdir.clone(),
                };
                installer::install(root, &from, &opts)?
            }
            SourceKind::Archive => {
                let at = found.index.join(&r.source.archive);
                let bytes = self.fetch_checked(&at, r)?;
                let unpacked = archive::unpack(&bytes, root)
                    .with_context(|| format!("{}: the archive {}", r.id(), at.display()))?;
                let dir = installer::crate_in_repository(
                    unpacked.path(),
                    &r.source.subdir,
                    &at.display(),
                )?;
                let opts = InstallOptions {
                    force,
                    index: index.clone(),
                    signed_by: signed_by.clone(),
                    expect: expect.clone(),
                    ..Default::default()
                };
                let source = Source::Archive {
                    url: at.display(),
                    subdir: r.source.subdir.clone(),
                };
                installer::install_crate(root, &dir, source, &opts)?
            }
            SourceKind::Library => {
                if r.target != installed::TARGET {
                    bail!(
                        "{} is a library built for {}, and this host runs on {}",
                        r.id(),
                        r.target,
                        installed::TARGET
                    );
                }
                let at = found.index.join(&r.source.library);
                let bytes = self.fetch_checked(&at, r)?;
                let tmp = installer::scratch(root, "lib-")?;
                let file = tmp.path().join(format!(
                    "{}{}{}",
                    std::env::consts::DLL_PREFIX,
                    r.name.replace('-', "_"),
                    std::env::consts::DLL_SUFFIX
                ));
                std::fs::write(&file, bytes)?;
                installed::install_library(
                    root,
                    &file,
                    Provenance {
                        source: Source::Library { path: at.display() },
                        source_sha256: String::new(),
                        toolchain: String::new(),
                        plugin_toml: None,
                        index: index.clone(),
                        signed_by: signed_by.clone(),
                        expect: expect.clone(),
                    },
                    force,
                )?
            }
        };
        if done.record.name != r.name || done.record.version != r.version {
            let _ = std::fs::remove_dir_all(&done.dir);
            bail!(
                "the index {index} lists {}, and its source is {}; not installed",
                r.id(),
                done.id()
            );
        }
        Ok(done)
    }

    /// Fetches a file a record names and checks it against the record's checksum.
    fn fetch_checked(&self, at: &Location, r: &Record) -> Result<Vec<u8>> {
        let bytes = fetch::fetch(at, &self.settings.policy(), fetch::FILE_LIMIT)?;
        let sum = sha256(&bytes);
        if sum != r.checksum.to_ascii_lowercase() {
            bail!(
                "{}: {} has SHA-256 {} where the index says {}; nothing was installed",
                r.id(),
                at.display(),
                installed::short(&sum),
                installed::short(&r.checksum)
            );
        }
        Ok(bytes)
    }
}

/// SHA-256 of bytes, in hex.
pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(bytes))
}
