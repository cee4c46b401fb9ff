//! The index format: a TOML file of records, one per plugin version, as crates.io's index has
//! one line per crate version.
//!
//! ```toml
//! format = 1
//!
//! [[plugin]]
//! name = "combine"
//! version = "0.1.0"
//! description = "binary RL and on-policy distillation together"
//! kinds = ["loss", "reward"]
//! plugin_api = ">=1.3, <2"        # the plugin API versions it loads under
//! permissions = []                 # what it declares: network, filesystem, sandbox, process
//! checksum = "<sha256>"            # of the source tree (git), the archive, or the library
//! source = { git = "https://example.org/openclaw-host.git", rev = "<commit>", subdir = "methods/combine" }
//! signature = """untrusted comment: ...""" # minisign, over the record without this field
//! ```

use anyhow::{anyhow, bail, Context, Result};
use openclaw_plugins::installed::check_component;
use serde::{Deserialize, Serialize};

/// The layout version of index files.
pub const FORMAT: u32 = 1;

/// The kinds a record may list: the plugin kinds, and `data` for a package of files (a task
/// set) that no library carries.
pub const KINDS: [&str; 6] = ["loss", "reward", "rollout", "generate", "env", "data"];

/// What a plugin may declare it does, beyond computing on what the host hands it.
pub use openclaw_plugins::manifest_file::PERMISSIONS;

/// An index file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The records, in any order.
    #[serde(default, rename = "plugin")]
    pub records: Vec<Record>,
}

/// One version of one plugin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The plugin's name.
    pub name: String,
    /// Its version (semver).
    pub version: String,
    /// One line about it.
    #[serde(default)]
    pub description: String,
    /// What it provides ([`KINDS`]).
    pub kinds: Vec<String>,
    /// The plugin API versions it loads under, as a semver requirement (`>=1.3, <2`).
    pub plugin_api: String,
    /// What it declares it does ([`PERMISSIONS`]): the publisher's word; a plugin runs as
    /// native code with the host's rights either way.
    #[serde(default)]
    pub permissions: Vec<String>,
    /// SHA-256 (hex) of what the source names: the crate's source tree for `git`
    /// (`openclaw_plugins::installed::tree_sha256`), the file for `archive` and `library`.
    pub checksum: String,
    /// Withdrawn: not installed unless asked for (`--allow-yanked`), as crates.io's yanked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yanked: bool,
    /// For a `library` source: the target triple it was built for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    /// The contract checks' result when it was packaged (`plugins test`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub smoke: String,
    /// Where it is.
    pub source: RecordSource,
    /// A minisign signature of the record without this field ([`Record::signed_bytes`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

/// Where a record's plugin is: one of a git repository, an archive or a built library.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordSource {
    /// A git repository's URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub git: String,
    /// With `git`: the commit (or tag) to build.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rev: String,
    /// With `git` or `archive`: the crate's folder in it (empty: its root or its one crate).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subdir: String,
    /// A `.tar.gz` of the crate's sources (a URL, or a path relative to the index).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub archive: String,
    /// A built library (a URL, or a path relative to the index).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub library: String,
}

/// The one kind of source a record names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A git repository.
    Git,
    /// A source archive.
    Archive,
    /// A built library.
    Library,
}

impl RecordSource {
    /// Which kind it is; an error unless exactly one of `git`, `archive`, `library` is set.
    pub fn kind(&self) -> Result<SourceKind> {
        let set: Vec<SourceKind> = [
            (!self.git.is_empty()).then_some(SourceKind::Git),
            (!self.archive.is_empty()).then_some(SourceKind::Archive),
            (!self.library.is_empty()).then_some(SourceKind::Library),
        ]
        .into_iter()
        .flatten()
        .collect();
        match set.as_slice() {
            [one] => Ok(*one),
            [] => bail!("source names none of git, archive, library"),
            _ => bail!("source names more than one of git, archive, library"),
        }
    }

    /// One line for messages.
    pub fn describe(&self) -> String {
        match self.kind() {
            Ok(SourceKind::Git) if self.subdir.is_empty() => format!("{}@{}", self.git, self.rev),
            Ok(SourceKind::Git) => format!("{}@{}:{}", self.git, self.rev, self.subdir),
            Ok(SourceKind::Archive) => self.archive.clone(),
            Ok(SourceKind::Library) => self.library.clone(),
            Err(_) => "(invalid source)".into(),
        }
    }
}

impl Record {
    /// `name@version`.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }

    /// The bytes a signature covers: a fixed first line, then the record without its
    /// signature as compact JSON, fields in their declared order. Field order and spelling in
    /// the index file do not matter, a field a signer did not see cannot be added (unknown
    /// fields are refused), and the bytes do not depend on a TOML writer's version.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let mut unsigned = self.clone();
        unsigned.signature.clear();
        let mut out = b"openclaw-host index record 1\n".to_vec();
        out.extend(serde_json::to_vec(&unsigned).expect("a record serialises"));
        out
    }

    /// Whether it loads under plugin API `api`.
    pub fn supports_api(&self, api: &str) -> Result<bool> {
        let req = semver::VersionReq::parse(&self.plugin_api)
            .map_err(|e| anyhow!("{}: plugin_api `{}`: {e}", self.id(), self.plugin_api))?;
        let v = semver::Version::parse(api).with_context(|| format!("plugin API `{api}`"))?;
        Ok(req.matches(&v))
    }

    /// Checks what the host relies on before using the record.
    pub fn check(&self) -> Result<()> {
        check_component("name", &self.name)?;
        check_component("version", &self.version)?;
        semver::Version::parse(&self.version)
            .map_err(|e| anyhow!("version `{}` is not semver: {e}", self.version))?;
        semver::VersionReq::parse(&self.plugin_api)
            .map_err(|e| anyhow!("plugin_api `{}`: {e}", self.plugin_api))?;
        if self.kinds.is_empty() {
            bail!("kinds is empty");
        }
        for k in &self.kinds {
            if !KINDS.contains(&k.as_str()) {
                bail!("unknown kind `{k}` (known: {})", KINDS.join(", "));
            }
        }
        for p in &self.permissions {
            if !PERMISSIONS.iter().any(|(n, _)| n == p) {
                bail!(
                    "unknown permission `{p}` (known: {})",
                    PERMISSIONS
                        .iter()
                        .map(|(n, _)| *n)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if self.checksum.len() != 64 || !self.checksum.bytes().all(lower_hex) {
            bail!("checksum is not a SHA-256 in lower-case hex (64 digits)");
        }
        let kind = self.source.kind()?;
        if kind == SourceKind::Git && self.source.rev.is_empty() {
            bail!("a git source needs `rev` (the commit to build)");
        }
        if kind == SourceKind::Git && !openclaw_plugins::install::is_commit_id(&self.source.rev) {
            bail!(
                "`rev` {} is not a full commit id: a branch or tag can move, a commit cannot",
                self.source.rev
            );
        }
        if kind == SourceKind::Library && self.target.is_empty() {
            bail!("a library source needs `target` (the triple it was built for)");
        }
        if kind != SourceKind::Git && !self.source.rev.is_empty() {
            bail!("`rev` belongs to a git source");
        }
        if kind == SourceKind::Library && !self.source.subdir.is_empty() {
            bail!("`subdir` belongs to a git or archive source");
        }
        Ok(())
    }

    /// What its permissions mean, one line each (none: "none declared").
    pub fn permission_lines(&self) -> Vec<String> {
        if self.permissions.is_empty() {
            return vec!["none declared".into()];
        }
        self.permissions
            .iter()
            .map(|p| {
                let what = PERMISSIONS
                    .iter()
                    .find(|(n, _)| n == p)
                    .map_or("", |(_, w)| *w);
                format!("{p}: {what}")
            })
            .collect()
    }
}

impl Index {
    /// Parses an index file's text; `origin` names it in errors. Every record is checked, and
    /// a name and version listed twice is refused.
    pub fn parse(text: &str, origin: &str) -> Result<Index> {
        let index: Index = toml::from_str(text)
            .map_err(|e| anyhow!("index {origin}: {}", e.message().trim().replace('\n', " ")))?;
        if index.format != FORMAT {
            bail!(
                "index {origin} has format {}, and this host reads format {FORMAT}",
                index.format
            );
        }
        for (i, r) in index.records.iter().enumerate() {
            r.check()
                .with_context(|| format!("index {origin}: record {} ({})", i + 1, r.id()))?;
            if index.records[..i]
                .iter()
                .any(|o| o.name == r.name && o.version == r.version)
            {
                bail!("index {origin} lists {} twice", r.id());
            }
        }
        Ok(index)
    }

    /// Reads an index from elsewhere for installing from it: a record that cannot be read or
    /// fails its checks (a newer host's field, a bad checksum) is left out and named in the
    /// second value, so one bad record does not take the others with it.
    pub fn parse_lenient(text: &str, origin: &str) -> Result<(Index, Vec<String>)> {
        #[derive(Deserialize)]
        struct Loose {
            format: u32,
            #[serde(default)]
            plugin: Vec<toml::Value>,
        }
        let loose: Loose = toml::from_str(text)
            .map_err(|e| anyhow!("index {origin}: {}", e.message().trim().replace('\n', " ")))?;
        if loose.format != FORMAT {
            bail!(
                "index {origin} has format {}, and this host reads format {FORMAT}",
                loose.format
            );
        }
        let mut index = Index::new();
        let mut skipped = Vec::new();
        for (i, value) in loose.plugin.into_iter().enumerate() {
            let read = Record::deserialize(value)
                .map_err(|e| anyhow!("{}", e.message().trim()))
                .and_then(|r| r.check().map(|()| r));
            match read {
                Ok(r)
                    if index
                        .records
                        .iter()
                        .any(|o| o.name == r.name && o.version == r.version) =>
                {
                    skipped.push(format!("{} is listed twice; the first is kept", r.id()))
                }
                Ok(r) => index.records.push(r),
                Err(e) => skipped.push(format!("record {}: {e:#}", i + 1)),
            }
        }
        Ok((index, skipped))
    }

    /// An empty index.
    pub fn new() -> Index {
        Index {
            format: FORMAT,
            records: Vec::new(),
        }
    }

    /// Adds a record, replacing the one of the same name and version.
    pub fn put(&mut self, record: Record) {
        self.records
            .retain(|r| !(r.name == record.name && r.version == record.version));
        self.records.push(record);
        self.records.sort_by(|a, b| {
            a.name
                .cmp(&b.name)
                .then_with(|| openclaw_plugins::installed::compare_versions(&a.version, &b.version))
        });
    }

    /// Its text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("an index serialises")
    }
}

impl Default for Index {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn record(name: &str, version: &str) -> Record {
        Record {
            name: name.into(),
            version: version.into(),
            description: "d".into(),
            kinds: vec!["loss".into()],
            plugin_api: ">=1.0, <2".into(),
            permissions: vec![],
            checksum: "ab".repeat(32),
            yanked: false,
            target: String::new(),
            smoke: String::new(),
            source: RecordSource {
                git: "https://example.org/x.git".into(),
                rev: "0123456789abcdef0123456789abcdef01234567".into(),
                ..Default::default()
            },
            signature: String::new(),
        }
    }

    #[test]
    fn an_index_reads_back_and_each_bad_record_is_named() {
        let mut index = Index::new();
        index.put(record("b", "0.2.0"));
        index.put(record("a", "0.10.0"));
        index.put(record("a", "0.9.0"));
        let text = index.to_toml();
        let back = Index::parse(&text, "t").unwrap();
        assert_eq!(back, index);
        assert_eq!(
            back.records.iter().map(Record::id).collect::<Vec<_>>(),
            ["a@0.9.0", "a@0.10.0", "b@0.2.0"]
        );

        let bad = |edit: fn(&mut Record), expect: &str| {
            let mut r = record("x", "1.0.0");
            edit(&mut r);
            let i = Index {
                format: FORMAT,
                records: vec![r],
            };
            let e = format!("{:#}", Index::parse(&i.to_toml(), "t").unwrap_err());
            assert!(e.contains(expect), "expected `{expect}` in {e}");
        };
        bad(|r| r.name = "../x".into(), "cannot name a directory");
        bad(|r| r.version = "one".into(), "is not semver");
        bad(|r| r.plugin_api = "soon".into(), "plugin_api `soon`");
        bad(|r| r.kinds = vec!["telepathy".into()], "unknown kind");
        bad(
            |r| r.permissions = vec!["root".into()],
            "unknown permission",
        );
        bad(|r| r.checksum = "12".into(), "not a SHA-256");
        bad(|r| r.source.rev.clear(), "needs `rev`");
        bad(|r| r.source.rev = "main".into(), "not a full commit id");
        bad(|r| r.checksum = "AB".repeat(32), "lower-case hex");
        bad(
            |r| r.source.archive = "x.tar.gz".into(),
            "more than one of git, archive, library",
        );
        bad(
            |r| {
                r.source.git.clear();
                r.source.rev.clear();
                r.source.library = "libx.so".into();
            },
            "needs `target`",
        );
        let mut twice = Index::new();
        twice.records = vec![record("x", "1.0.0"), record("x", "1.0.0")];
        let e = Index::parse(&twice.to_toml(), "t").unwrap_err();
        assert!(format!("{e}").contains("lists x@1.0.0 twice"), "{e}");
        let e = Index::parse("format = 2\n", "t").unwrap_err();
        assert!(format!("{e}").contains("format 2"), "{e}");
        let e = Index::parse("format = 1\nsurprise = 1\n", "t").unwrap_err();
        assert!(format!("{e}").contains("surprise"), "{e}");

        // Read for installing, a bad record is left out and named; the others stay.
        let mut mixed = Index::new();
        mixed.put(record("good", "1.0.0"));
        let mut text = mixed.to_toml();
        text.push_str("\n[[plugin]]\nname = \"new\"\nfrom_a_newer_host = 1\n");
        let (read, skipped) = Index::parse_lenient(&text, "t").unwrap();
        assert_eq!(read.records.len(), 1);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("record 2"), "{skipped:?}");
    }

    #[test]
    fn the_signed_bytes_leave_out_only_the_signature() {
        let mut r = record("x", "1.0.0");
        let before = r.signed_bytes();
        r.signature = "sig".into();
        assert_eq!(r.signed_bytes(), before);
        r.checksum = "cd".repeat(32);
        assert_ne!(r.signed_bytes(), before);
        assert!(r.supports_api("1.4.0").unwrap());
        assert!(!r.supports_api("2.0.0").unwrap());
    }
}
