//! Reading a plugin's configuration.

use serde::de::{DeserializeOwned, Deserializer, IgnoredAny};
use serde::Deserialize;

/// Parses the TOML configuration a constructor receives into the plugin's own config type.
/// Errors name the key and what was wrong with it. Mark the type `#[serde(default)]` to let
/// users leave keys out, and `#[serde(deny_unknown_fields)]` to catch misspelled keys.
pub fn parse_config<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        format!("invalid plugin configuration: {}", e.message().trim()).replace('\n', " ")
            + &location(text, &e)
    })
}

/// Parses one table of the configuration (`[loss]`, `[reward]`, ...) into the plugin's config
/// type; a missing table gives the type's defaults. Lets a plugin with several kinds keep one
/// configuration file with a section per kind.
pub fn parse_config_section<T: DeserializeOwned + Default>(
    text: &str,
    section: &str,
) -> Result<T, String> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        format!("invalid plugin configuration: {}", e.message().trim()).replace('\n', " ")
            + &location(text, &e)
    })?;
    match table.get(section) {
        None => Ok(T::default()),
        Some(v) => v.clone().try_into().map_err(|e: toml::de::Error| {
            format!(
                "invalid plugin configuration in [{section}]: {}",
                e.message().trim()
            )
            .replace('\n', " ")
        }),
    }
}

/// A table of `config.toml` that belongs to another kind of the plugin or to the host (`[run]`):
/// one file serves every kind, so each kind's config type accepts the others' tables without
/// reading them, and still refuses unknown keys of its own
/// (`#[serde(rename = "reward")] _reward: OtherTable`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OtherTable;

impl<'de> Deserialize<'de> for OtherTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(d).map(|_| OtherTable)
    }
}

/// Checks that `v` is in `[0, 1)`, the range of a clip width; the error names the key.
pub fn check_clip(key: &str, v: f32) -> Result<(), String> {
    if (0.0..1.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("{key} = {v} is out of range: it must be in [0, 1)"))
    }
}

/// Checks that `v` is finite and not negative; the error names the key.
pub fn check_non_negative(key: &str, v: f32) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!(
            "{key} = {v} is out of range: it must be finite and >= 0"
        ))
    }
}

/// Checks that `v` is finite; the error names the key.
pub fn check_finite(key: &str, v: f32) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("{key} = {v} is out of range: it must be finite"))
    }
}

/// Where the error is: the line number and the line itself, so a type error names its key.
fn location(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) if !text.is_empty() => {
            let start = span.start.min(text.len());
            let line = text[..start].matches('\n').count() + 1;
            let content = text.lines().nth(line - 1).unwrap_or("").trim();
            if content.is_empty() {
                format!(" (line {line})")
            } else {
                format!(" (line {line}: `{content}`)")
            }
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(default, deny_unknown_fields)]
    struct Cfg {
        eps_clip: f32,
        group_norm: bool,
    }
    impl Default for Cfg {
        fn default() -> Self {
            Cfg {
                eps_clip: 0.2,
                group_norm: false,
            }
        }
    }

    #[test]
    fn defaults_fill_missing_keys_and_errors_name_the_key() {
        assert_eq!(parse_config::<Cfg>("").unwrap(), Cfg::default());
        assert_eq!(parse_config::<Cfg>("eps_clip = 0.1").unwrap().eps_clip, 0.1);
        let e = parse_config::<Cfg>("eps_clip = \"big\"").unwrap_err();
        assert!(e.contains("invalid plugin configuration"), "{e}");
        assert!(e.contains("`eps_clip = \"big\"`"), "the key is named: {e}");
        let e = parse_config::<Cfg>("\n\neps_clp = 0.1").unwrap_err();
        assert!(e.contains("eps_clp") && e.contains("line 3"), "{e}");
        let c: Cfg =
            parse_config_section("[loss]\neps_clip = 0.3\n[reward]\nx = 1", "loss").unwrap();
        assert_eq!(c.eps_clip, 0.3);
        assert_eq!(
            parse_config_section::<Cfg>("[reward]\nx = 1", "loss").unwrap(),
            Cfg::default()
        );
        let e = parse_config_section::<Cfg>("[loss]\nepsclip = 1", "loss").unwrap_err();
        assert!(e.contains("[loss]") && e.contains("epsclip"), "{e}");
    }
}
