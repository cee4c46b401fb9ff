//! Reading a plugin's configuration.

use serde::de::DeserializeOwned;

/// Parses the TOML configuration a constructor receives into the plugin's own config type.
/// Errors name the key and what was wrong with it. Mark the type `#[serde(default)]` to let
/// users leave keys out, and `#[serde(deny_unknown_fields)]` to catch misspelled keys.
pub fn parse_config<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        format!("invalid plugin configuration: {}", e.message().trim()).replace('\n', " ")
            + &location(text, &e)
    })
}

fn location(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) if !text.is_empty() => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
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
        let e = parse_config::<Cfg>("\n\neps_clp = 0.1").unwrap_err();
        assert!(e.contains("eps_clp") && e.contains("line 3"), "{e}");
    }
}
