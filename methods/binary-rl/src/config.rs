//! The plugin's configuration: `config.toml` beside this crate holds the defaults.

use openclaw_judging::{check_max_judge_chars, DEFAULT_MAX_JUDGE_CHARS};
use openclaw_plugin_api::config::OtherTable;
use openclaw_plugin_api::math::GroupNorm;
use openclaw_plugin_api::parse_config;
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::surrogate::ClippedSurrogate;

/// The default configuration, as shipped in the manifest.
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The configuration of the binary RL loss: the top-level keys of config.toml.
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
    /// The reward's table, read by [`BinaryRlRewardConfig`].
    #[serde(rename = "reward")]
    _reward: OtherTable,
    /// The host's `[run]` table of suggested run settings.
    #[serde(rename = "run")]
    _run: OtherTable,
}

impl Default for BinaryRlConfig {
    fn default() -> Self {
        BinaryRlConfig {
            eps_clip: 0.2,
            eps_clip_high: 0.28,
            group_norm: GroupNorm::None,
            kl_coef: 0.0,
            tis_cap: 0.0,
            _reward: OtherTable,
            _run: OtherTable,
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

    /// The clipped surrogate these settings describe.
    pub fn surrogate(&self) -> ClippedSurrogate {
        ClippedSurrogate {
            eps_clip: self.eps_clip,
            eps_clip_high: self.eps_clip_high,
            kl_coef: self.kl_coef,
            tis_cap: self.tis_cap,
        }
    }

    /// Checks every value's range; the error names the key and the bad value.
    pub fn validate(&self) -> Result<(), String> {
        self.surrogate().validate()
    }
}

/// The configuration of the binary RL reward: the `[reward]` table of config.toml.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct BinaryRlRewardConfig {
    /// The most characters of the response, and of the next state, the judge reads; longer
    /// text loses its middle. 0: no limit.
    pub max_judge_chars: usize,
}

impl Default for BinaryRlRewardConfig {
    fn default() -> Self {
        BinaryRlRewardConfig {
            max_judge_chars: DEFAULT_MAX_JUDGE_CHARS,
        }
    }
}

/// The whole file as the reward reads it: the loss's keys are not its business.
#[derive(Default, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default)]
struct RewardFile {
    reward: BinaryRlRewardConfig,
}

impl BinaryRlRewardConfig {
    /// Parses and validates the `[reward]` table of TOML text; missing keys keep their defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: RewardFile = parse_config(text)?;
        file.reward.validate()?;
        Ok(file.reward)
    }

    /// Checks every value's range; the error names the key and the bad value.
    pub fn validate(&self) -> Result<(), String> {
        check_max_judge_chars(self.max_judge_chars)
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
    fn the_loss_and_the_reward_ignore_each_other() {
        let text = "eps_clip = 0.1\n[reward]\nmax_judge_chars = 500\n[run]\nmajority_vote_n = 1";
        assert_eq!(BinaryRlConfig::parse(text).unwrap().eps_clip, 0.1);
        assert_eq!(
            BinaryRlRewardConfig::parse(text).unwrap().max_judge_chars,
            500
        );
        // A misspelling in either part is still caught by its own parser.
        let e = BinaryRlRewardConfig::parse("[reward]\nmax_judge_char = 1").unwrap_err();
        assert!(e.contains("max_judge_char") && e.contains("line 2"), "{e}");
        let e = BinaryRlConfig::parse("[rewards]\nx = 1").unwrap_err();
        assert!(e.contains("rewards"), "{e}");
        // A bad reward value does not stop the loss, and the other way round.
        BinaryRlConfig::parse("[reward]\nmax_judge_chars = 3").unwrap();
        BinaryRlRewardConfig::parse("eps_clip = 7.0").unwrap();
    }

    #[test]
    fn reward_keys_parse_and_errors_name_the_key_and_the_value() {
        assert_eq!(
            BinaryRlRewardConfig::parse(DEFAULT_CONFIG).unwrap(),
            BinaryRlRewardConfig::default()
        );
        assert_eq!(
            BinaryRlRewardConfig::parse("[reward]\nmax_judge_chars = 0")
                .unwrap()
                .max_judge_chars,
            0
        );
        let e = BinaryRlRewardConfig::parse("[reward]\nmax_judge_chars = 50").unwrap_err();
        assert!(
            e.contains("reward.max_judge_chars") && e.contains("50"),
            "{e}"
        );
        let e = BinaryRlRewardConfig::parse("[reward]\nmax_judge_chars = -1").unwrap_err();
        assert!(e.contains("max_judge_chars = -1"), "{e}");
        let e = BinaryRlRewardConfig::parse("reward = 3").unwrap_err();
        assert!(e.contains("reward = 3"), "{e}");
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
