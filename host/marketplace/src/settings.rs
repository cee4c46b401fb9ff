//! Marketplace settings: `settings.toml` in the installed-plugins directory, under the flags
//! of one command.
//!
//! ```toml
//! indexes = ["https://example.org/openclaw/index.toml", "/srv/team/index.toml"]
//! trusted_keys = ["RWQ...", "/etc/openclaw/team.pub"]
//! only_signed = true
//! allow_http = false
//! ```

use anyhow::{anyhow, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Where the settings file is.
pub fn settings_path() -> PathBuf {
    openclaw_plugins::installed::plugin_dir().join("settings.toml")
}

/// The settings in force.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// The indexes, searched in order (paths or URLs).
    pub indexes: Vec<String>,
    /// The public keys whose signatures are trusted (base64).
    pub trusted_keys: Vec<String>,
    /// Accept only records signed by a trusted key.
    pub only_signed: bool,
    /// Accept plain `http://` indexes and sources.
    pub allow_http: bool,
}

/// What a command's flags add to the settings file.
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--index`: these indexes instead of the file's.
    pub indexes: Vec<String>,
    /// `--trusted-key`: keys trusted besides the file's.
    pub trusted_keys: Vec<String>,
    /// `--only-signed`.
    pub only_signed: bool,
    /// `--allow-http`.
    pub allow_http: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    indexes: Vec<String>,
    #[serde(default)]
    trusted_keys: Vec<String>,
    #[serde(default)]
    only_signed: bool,
    #[serde(default)]
    allow_http: bool,
}

impl Settings {
    /// The settings file (when there is one) under `flags`.
    pub fn load(flags: &Flags) -> Result<Settings> {
        Self::load_from(&settings_path(), flags)
    }

    /// [`Settings::load`] from a given file. Relative paths in the file are read from its
    /// folder; a trusted key that names a file is that file's key.
    pub fn load_from(path: &Path, flags: &Flags) -> Result<Settings> {
        let file: File = match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| {
                anyhow!(
                    "invalid {}: {}",
                    path.display(),
                    e.message().trim().replace('\n', " ")
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let base = path.parent().unwrap_or(Path::new("."));
        let beside = |s: &String| -> String {
            let is_url = s.contains("://");
            if is_url || Path::new(s).is_absolute() {
                s.clone()
            } else {
                base.join(s).display().to_string()
            }
        };
        let indexes = if flags.indexes.is_empty() {
            file.indexes.iter().map(beside).collect()
        } else {
            flags.indexes.clone()
        };
        let mut trusted_keys = Vec::new();
        let file_keys: Vec<String> = file
            .trusted_keys
            .iter()
            .map(|k| key_or_file(k, Some(base)))
            .collect::<Result<_>>()?;
        let flag_keys: Vec<String> = flags
            .trusted_keys
            .iter()
            .map(|k| key_or_file(k, None))
            .collect::<Result<_>>()?;
        for k in file_keys.into_iter().chain(flag_keys) {
            crate::sign::public_key(&k)?;
            if !trusted_keys.contains(&k) {
                trusted_keys.push(k);
            }
        }
        Ok(Settings {
            indexes,
            trusted_keys,
            only_signed: file.only_signed || flags.only_signed,
            allow_http: file.allow_http || flags.allow_http,
        })
    }
}

impl Settings {
    /// What may be fetched under these settings.
    pub fn policy(&self) -> crate::fetch::FetchPolicy {
        crate::fetch::FetchPolicy {
            allow_http: self.allow_http,
        }
    }
}

/// A key as written: its base64 form, or a path to a minisign `.pub` file.
fn key_or_file(k: &str, base: Option<&Path>) -> Result<String> {
    let as_path = match base {
        Some(b) if !Path::new(k).is_absolute() => b.join(k),
        _ => PathBuf::from(k),
    };
    if k.ends_with(".pub") || as_path.is_file() {
        let text = std::fs::read_to_string(&as_path)
            .with_context(|| format!("cannot read the public key {}", as_path.display()))?;
        return Ok(crate::sign::public_key(&text)
            .with_context(|| as_path.display().to_string())?
            .to_base64());
    }
    Ok(k.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_join_the_file_and_paths_are_read_from_its_folder() {
        let d = tempfile::tempdir().unwrap();
        let (key, _, pub_file) = crate::sign::keygen(&d.path().join("k")).unwrap();
        let path = d.path().join("settings.toml");
        std::fs::write(
            &path,
            "indexes = [\"team/index.toml\", \"https://example.org/i.toml\"]\ntrusted_keys = [\"k.pub\"]\n",
        )
        .unwrap();
        let s = Settings::load_from(&path, &Flags::default()).unwrap();
        assert_eq!(
            s.indexes,
            [
                d.path().join("team/index.toml").display().to_string(),
                "https://example.org/i.toml".to_string()
            ]
        );
        assert_eq!(s.trusted_keys, std::slice::from_ref(&key));
        assert!(!s.only_signed);
        let s = Settings::load_from(
            &path,
            &Flags {
                indexes: vec!["/x/i.toml".into()],
                trusted_keys: vec![pub_file.display().to_string()],
                only_signed: true,
                allow_http: false,
            },
        )
        .unwrap();
        assert_eq!(s.indexes, ["/x/i.toml"]);
        assert_eq!(s.trusted_keys, [key], "the same key once");
        assert!(s.only_signed);
        std::fs::write(&path, "indexs = []\n").unwrap();
        let e = Settings::load_from(&path, &Flags::default()).unwrap_err();
        assert!(format!("{e}").contains("indexs"), "{e}");
        let e = Settings::load_from(
            &d.path().join("none.toml"),
            &Flags {
                trusted_keys: vec!["not-a-key".into()],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(format!("{e}").contains("not a minisign public key"), "{e}");
    }
}
