//! The plugin's configuration: `config.toml` beside this crate holds the defaults.

use openclaw_plugin_api::math::GroupNorm;
use openclaw_plugin_api::parse_config;
use openclaw_plugin_api::serde::Deserialize;

/// The default configuration, as shipped in the manifest.
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The configuration of the binary RL loss.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct BinaryRlConfig {
    /// Lower clip range: the ratio is clipped at `1 - eps_clip`.
    pub eps_clip: f32,
    /// Upper clip range: the ratio is clipped at `1 + eps_clip_high`.
    pub eps_clip_high: f32,
    /// How rewards become advantages within a group.
    pub group_norm: GroupNorm,
    /// Weight of the k3 KL penalty against the reference model.
    pub kl_coef: f32,
    /// Cap of the truncated importance weight; 0 turns it off.
    pub tis_cap: f32,
}

impl Default for BinaryRlConfig {
    fn default() -> Self {
        BinaryRlConfig {
            eps_clip: 0.2,
            eps_clip_high: 0.28,
            group_norm: GroupNorm::None,
            kl_coef: 0.0,
            tis_cap: 0.0,
        }
    }
}

impl BinaryRlConfig {
    /// Parses and validates TOML text; missing keys keep their defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        let config: Self = parse_config(text)?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value's range; the error names the key and the bad value.
    pub fn validate(&self) -> Result<(), String> {
        check_eps("eps_clip", self.eps_clip)?;
        check_eps("eps_clip_high", self.eps_clip_high)?;
        check_non_negative("kl_coef", self.kl_coef)?;
        check_non_negative("tis_cap", self.tis_cap)
    }
}

fn check_eps(key: &str, v: f32) -> Result<(), String> {
    if (0.0..1.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("{key} = {v} is out of range: it must be in [0, 1)"))
    }
}

fn check_non_negative(key: &str, v: f32) -> Result<(), String> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(format!(
            "{key} = {v} is out of range: it must be finite and >= 0"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_is_the_default() {
        assert_eq!(
            BinaryRlConfig::parse(DEFAULT_CONFIG).unwrap(),
            BinaryRlConfig::default()
        );
        assert_eq!(
            BinaryRlConfig::parse("").unwrap(),
            BinaryRlConfig::default()
        );
    }

    #[test]
    fn keys_parse() {
        let c = BinaryRlConfig::parse(
            "eps_clip = 0.1\neps_clip_high = 0.3\ngroup_norm = \"center_scale\"\n\
             kl_coef = 0.02\ntis_cap = 2.0",
        )
        .unwrap();
        assert_eq!(c.eps_clip, 0.1);
        assert_eq!(c.eps_clip_high, 0.3);
        assert_eq!(c.group_norm, GroupNorm::CenterScale);
        assert_eq!(c.kl_coef, 0.02);
        assert_eq!(c.tis_cap, 2.0);
        let c = BinaryRlConfig::parse("group_norm = \"center\"").unwrap();
        assert_eq!(c.group_norm, GroupNorm::Center);
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        for (text, key, value) in [
            ("eps_clip = 1.0", "eps_clip", "1"),
            ("eps_clip = -0.1", "eps_clip", "-0.1"),
            ("eps_clip_high = 1.5", "eps_clip_high", "1.5"),
            ("eps_clip_high = nan", "eps_clip_high", "NaN"),
            ("kl_coef = -0.01", "kl_coef", "-0.01"),
            ("kl_coef = inf", "kl_coef", "inf"),
            ("tis_cap = -1.0", "tis_cap", "-1"),
        ] {
            let e = BinaryRlConfig::parse(text).unwrap_err();
            assert!(e.contains(key) && e.contains(value), "{text}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_variants_are_rejected() {
        let e = BinaryRlConfig::parse("eps_clp = 0.1").unwrap_err();
        assert!(e.contains("eps_clp"), "{e}");
        let e = BinaryRlConfig::parse("group_norm = \"grpo\"").unwrap_err();
        assert!(e.contains("grpo") && e.contains("center_scale"), "{e}");
        let e = BinaryRlConfig::parse("kl_coef = \"high\"").unwrap_err();
        assert!(e.contains("high") && e.contains("line 1"), "{e}");
    }
}
