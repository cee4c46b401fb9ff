//! The plugin's configuration: `config.toml` beside this crate holds the defaults.

use openclaw_plugin_api::parse_config;
use openclaw_plugin_api::serde::Deserialize;

/// The default configuration, as shipped in the manifest.
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// Which distillation loss to compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", rename_all = "lowercase")]
pub enum Mode {
    /// PPO-clip with the token-level advantage `teacher_logp - old_logp`.
    #[default]
    Token,
    /// Reverse KL from the student to the teacher over the teacher's top-k plus a tail bin.
    Topk,
}

/// The configuration of the OPD loss.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct OpdConfig {
    /// Which loss to compute.
    pub mode: Mode,
    /// Lower clip range (token mode).
    pub eps_clip: f32,
    /// Upper clip range (token mode).
    pub eps_clip_high: f32,
    /// Weight of the k3 KL penalty against the reference model (token mode).
    pub kl_coef: f32,
    /// Cap of the truncated importance weight (token mode); 0 turns it off.
    pub tis_cap: f32,
}

impl Default for OpdConfig {
    fn default() -> Self {
        OpdConfig {
            mode: Mode::Token,
            eps_clip: 0.2,
            eps_clip_high: 0.2,
            kl_coef: 0.0,
            tis_cap: 0.0,
        }
    }
}

impl OpdConfig {
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
        check_non_negative("tis_cap", self.tis_cap)?;
        // The top-k loss has neither a reference penalty nor an importance weight; a value
        // that would silently do nothing is refused.
        if self.mode == Mode::Topk {
            for (key, v) in [("kl_coef", self.kl_coef), ("tis_cap", self.tis_cap)] {
                if v != 0.0 {
                    return Err(format!(
                        "{key} = {v} has no effect with mode = \"topk\": set it to 0 or use \
                         mode = \"token\""
                    ));
                }
            }
        }
        Ok(())
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
            OpdConfig::parse(DEFAULT_CONFIG).unwrap(),
            OpdConfig::default()
        );
        assert_eq!(OpdConfig::parse("").unwrap(), OpdConfig::default());
    }

    #[test]
    fn keys_parse() {
        let c = OpdConfig::parse(
            "mode = \"token\"\neps_clip = 0.1\neps_clip_high = 0.3\nkl_coef = 0.02\ntis_cap = 2.0",
        )
        .unwrap();
        assert_eq!(
            c,
            OpdConfig {
                mode: Mode::Token,
                eps_clip: 0.1,
                eps_clip_high: 0.3,
                kl_coef: 0.02,
                tis_cap: 2.0
            }
        );
        assert_eq!(
            OpdConfig::parse("mode = \"topk\"").unwrap().mode,
            Mode::Topk
        );
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        for (text, key, value) in [
            ("eps_clip = 1.0", "eps_clip", "1"),
            ("eps_clip = -0.5", "eps_clip", "-0.5"),
            ("eps_clip_high = nan", "eps_clip_high", "NaN"),
            ("kl_coef = -1.0", "kl_coef", "-1"),
            ("tis_cap = -inf", "tis_cap", "-inf"),
            ("mode = \"topk\"\nkl_coef = 0.1", "kl_coef", "0.1"),
            ("mode = \"topk\"\ntis_cap = 2.0", "tis_cap", "2"),
        ] {
            let e = OpdConfig::parse(text).unwrap_err();
            assert!(e.contains(key) && e.contains(value), "{text}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_modes_are_rejected() {
        let e = OpdConfig::parse("eps = 0.1").unwrap_err();
        assert!(e.contains("`eps`"), "{e}");
        let e = OpdConfig::parse("mode = \"sequence\"").unwrap_err();
        assert!(e.contains("sequence") && e.contains("topk"), "{e}");
    }
}
