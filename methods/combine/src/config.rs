//! The plugin's configuration: `config.toml` beside this crate holds the defaults.

use openclaw_judging::{check_max_judge_chars, DEFAULT_MAX_JUDGE_CHARS};
use openclaw_plugin_api::config::{check_finite, OtherTable};
use openclaw_plugin_api::math::GroupNorm;
use openclaw_plugin_api::parse_config;
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::surrogate::ClippedSurrogate;

/// The default configuration, as shipped in the manifest.
pub const DEFAULT_CONFIG: &str = include_str!("../config.toml");

/// The configuration of the combined loss: the top-level keys of config.toml.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct CombineConfig {
    /// Weight of the distillation advantage `teacher_logp - old_logp`.
    pub w_opd: f32,
    /// Weight of the reward advantage.
    pub w_rl: f32,
    /// How rewards become advantages within a group.
    pub group_norm: GroupNorm,
    /// Whether each sample's distillation advantages are centred on their mean.
    pub center_teacher: bool,
    /// Lower clip range: the ratio is clipped at `1 - eps_clip`.
    pub eps_clip: f32,
    /// Upper clip range: the ratio is clipped at `1 + eps_clip_high`.
    pub eps_clip_high: f32,
    /// Weight of the k3 KL penalty against the reference model.
    pub kl_coef: f32,
    /// Cap of the truncated importance weight; 0 turns it off.
    pub tis_cap: f32,
    /// The reward's table, read by [`CombineRewardConfig`].
    #[serde(rename = "reward")]
    _reward: OtherTable,
    /// The host's `[run]` table of suggested run settings.
    #[serde(rename = "run")]
    _run: OtherTable,
}

impl Default for CombineConfig {
    fn default() -> Self {
        CombineConfig {
            w_opd: 1.0,
            w_rl: 1.0,
            group_norm: GroupNorm::None,
            center_teacher: false,
            eps_clip: 0.2,
            eps_clip_high: 0.28,
            kl_coef: 0.0,
            tis_cap: 0.0,
            _reward: OtherTable,
            _run: OtherTable,
        }
    }
}

impl CombineConfig {
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
        check_finite("w_opd", self.w_opd)?;
        check_finite("w_rl", self.w_rl)?;
        self.surrogate().validate()?;
        if self.center_teacher && self.w_opd == 0.0 {
            return Err(
                "center_teacher = true centres the distillation term, and w_opd = 0 \
                        drops that term: set w_opd, or leave center_teacher out"
                    .into(),
            );
        }
        Ok(())
    }
}

/// The configuration of the combined reward: the `[reward]` table of config.toml.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct CombineRewardConfig {
    /// The most characters of the response, and of the next state, the judge reads; longer
    /// text loses its middle. 0: no limit.
    pub max_judge_chars: usize,
    /// Whether the hint judge and the hinted teacher run: the loss's `w_opd` is not 0 (not a
    /// key of the table: it follows from `w_opd`).
    #[serde(skip)]
    pub distill: bool,
}

impl Default for CombineRewardConfig {
    fn default() -> Self {
        CombineRewardConfig {
            max_judge_chars: DEFAULT_MAX_JUDGE_CHARS,
            distill: true,
        }
    }
}

/// The whole file as the reward reads it: its `[reward]` table and, of the loss's keys, only
/// `w_opd` (a loss without the distillation term needs no hints).
#[derive(Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default)]
struct RewardFile {
    reward: CombineRewardConfig,
    w_opd: f32,
}

impl Default for RewardFile {
    fn default() -> Self {
        RewardFile {
            reward: CombineRewardConfig::default(),
            w_opd: CombineConfig::default().w_opd,
        }
    }
}

impl CombineRewardConfig {
    /// Parses and validates the `[reward]` table of TOML text; missing keys keep their defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: RewardFile = parse_config(text)?;
        file.reward.validate()?;
        Ok(CombineRewardConfig {
            distill: file.w_opd != 0.0,
            ..file.reward
        })
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
            CombineConfig::parse(DEFAULT_CONFIG).unwrap(),
            CombineConfig::default()
        );
        assert_eq!(CombineConfig::parse("").unwrap(), CombineConfig::default());
    }

    #[test]
    fn keys_parse() {
        let c = CombineConfig::parse(
            "w_opd = 0.5\nw_rl = 2.0\ngroup_norm = \"center\"\neps_clip = 0.1\n\
             eps_clip_high = 0.3\nkl_coef = 0.02\ntis_cap = 2.0",
        )
        .unwrap();
        assert_eq!(
            c,
            CombineConfig {
                w_opd: 0.5,
                w_rl: 2.0,
                group_norm: GroupNorm::Center,
                eps_clip: 0.1,
                eps_clip_high: 0.3,
                kl_coef: 0.02,
                tis_cap: 2.0,
                ..CombineConfig::default()
            }
        );
    }

    #[test]
    fn errors_name_the_key_and_the_value() {
        for (text, key, value) in [
            ("w_opd = nan", "w_opd", "NaN"),
            ("w_rl = inf", "w_rl", "inf"),
            ("eps_clip = 1.0", "eps_clip", "1"),
            ("eps_clip_high = -0.2", "eps_clip_high", "-0.2"),
            ("kl_coef = -0.5", "kl_coef", "-0.5"),
            ("tis_cap = -2.0", "tis_cap", "-2"),
        ] {
            let e = CombineConfig::parse(text).unwrap_err();
            assert!(e.contains(key) && e.contains(value), "{text}: {e}");
        }
        // Negative weights are allowed (finite is all that is asked).
        CombineConfig::parse("w_opd = -1.0").unwrap();
    }

    #[test]
    fn the_loss_and_the_reward_ignore_each_other() {
        let text = "w_opd = 0.5\n[reward]\nmax_judge_chars = 300\n[run]\nmajority_vote_n = 1";
        assert_eq!(CombineConfig::parse(text).unwrap().w_opd, 0.5);
        assert_eq!(
            CombineRewardConfig::parse(text).unwrap().max_judge_chars,
            300
        );
        assert_eq!(
            CombineRewardConfig::parse(DEFAULT_CONFIG).unwrap(),
            CombineRewardConfig::default()
        );
        let e = CombineRewardConfig::parse("[reward]\nw_opd = 1.0").unwrap_err();
        assert!(e.contains("w_opd") && e.contains("line 2"), "{e}");
        let e = CombineRewardConfig::parse("[reward]\nmax_judge_chars = 199").unwrap_err();
        assert!(e.contains("reward.max_judge_chars = 199"), "{e}");
        let e = CombineConfig::parse("[rewards]\nx = 1").unwrap_err();
        assert!(e.contains("rewards"), "{e}");
        CombineConfig::parse("[reward]\nmax_judge_chars = 3").unwrap();
        CombineRewardConfig::parse("w_opd = nan").unwrap();
    }

    #[test]
    fn without_the_distillation_term_there_are_no_hints_to_centre() {
        assert!(CombineRewardConfig::parse(DEFAULT_CONFIG).unwrap().distill);
        assert!(!CombineRewardConfig::parse("w_opd = 0.0").unwrap().distill);
        assert!(CombineRewardConfig::parse("w_opd = 0.5").unwrap().distill);
        let e = CombineConfig::parse("w_opd = 0.0\ncenter_teacher = true").unwrap_err();
        assert!(
            e.contains("center_teacher") && e.contains("w_opd = 0"),
            "{e}"
        );
        CombineConfig::parse("w_opd = 0.5\ncenter_teacher = true").unwrap();
        CombineConfig::parse("w_opd = 0.0").unwrap();
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let e = CombineConfig::parse("w_ppo = 1.0").unwrap_err();
        assert!(e.contains("`w_ppo`"), "{e}");
        let e = CombineConfig::parse("group_norm = \"z\"").unwrap_err();
        assert!(e.contains("center_scale"), "{e}");
    }
}
