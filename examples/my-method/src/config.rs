//! Settings. The host passes the plugin's `config.toml` merged with the user's overrides as
//! TOML text; `parse_config` turns it into this struct.

use openclaw_plugin_api::parse_config;
use openclaw_plugin_api::serde::Deserialize;

/// The default configuration, shipped in the manifest so `openclaw-host plugins` can show it.
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The loss's settings.
// `default`: keys the user leaves out keep the values of `Default` below.
// `deny_unknown_fields`: a misspelled key is an error instead of being silently ignored.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct MyConfig {
    /// The ratio is clipped to `[1 - clip_eps, 1 + clip_eps]`.
    pub clip_eps: f32,
    /// Weight of the KL penalty.
    pub kl_coef: f32,
    /// The reward's table, read by [`MyRewardConfig`](crate::MyRewardConfig).
    #[serde(rename = "reward")]
    _reward: OtherTable,
}

/// The reward's table in the same file: accepted here, read by the reward.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct OtherTable;

impl<'de> Deserialize<'de> for OtherTable {
    fn deserialize<D: openclaw_plugin_api::serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Self, D::Error> {
        openclaw_plugin_api::serde::de::IgnoredAny::deserialize(d).map(|_| OtherTable)
    }
}

impl Default for MyConfig {
    fn default() -> Self {
        // Keep these equal to config.toml; a test checks it.
        MyConfig {
            clip_eps: 0.2,
            kl_coef: 0.02,
            _reward: OtherTable,
        }
    }
}

impl MyConfig {
    /// Parses TOML text and checks the values.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: MyConfig = parse_config(text)?;
        // Say which key is wrong and why: this message is what the user sees.
        if !(0.0..1.0).contains(&config.clip_eps) {
            return Err(format!(
                "clip_eps = {} is out of range: it must be in [0, 1)",
                config.clip_eps
            ));
        }
        if !(config.kl_coef.is_finite() && config.kl_coef >= 0.0) {
            return Err(format!(
                "kl_coef = {} is out of range: it must be finite and >= 0",
                config.kl_coef
            ));
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_is_the_default() {
        assert_eq!(
            MyConfig::parse(DEFAULT_CONFIG).unwrap(),
            MyConfig::default()
        );
        assert_eq!(MyConfig::parse("").unwrap(), MyConfig::default());
        assert_eq!(MyConfig::parse("kl_coef = 0.0").unwrap().kl_coef, 0.0);
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        for (text, key, value) in [
            ("clip_eps = 1.0", "clip_eps", "1"),
            ("clip_eps = -0.1", "clip_eps", "-0.1"),
            ("kl_coef = -0.02", "kl_coef", "-0.02"),
            ("kl_coef = nan", "kl_coef", "NaN"),
            ("clip = 0.1", "`clip`", ""),
        ] {
            let e = MyConfig::parse(text).unwrap_err();
            assert!(e.contains(key) && e.contains(value), "{text}: {e}");
        }
    }
}
