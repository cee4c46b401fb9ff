//! The plugin's configuration: `config.toml` beside this crate holds the defaults.

use openclaw_judging::{check_max_judge_chars, DEFAULT_MAX_JUDGE_CHARS};
use openclaw_plugin_api::config::OtherTable;
use openclaw_plugin_api::parse_config;
use openclaw_plugin_api::serde::Deserialize;
use openclaw_plugin_api::surrogate::ClippedSurrogate;

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

/// The configuration of the OPD loss: the top-level keys of config.toml.
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
    /// The reward's table, read by [`OpdRewardConfig`].
    #[serde(rename = "reward")]
    _reward: OtherTable,
    /// The host's `[run]` table of suggested run settings.
    #[serde(rename = "run")]
    _run: OtherTable,
}

impl Default for OpdConfig {
    fn default() -> Self {
        OpdConfig {
            mode: Mode::Token,
            eps_clip: 0.2,
            eps_clip_high: 0.2,
            kl_coef: 0.0,
            tis_cap: 0.0,
            _reward: OtherTable,
            _run: OtherTable,
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
        self.surrogate().validate()?;
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

/// The configuration of the OPD reward: the `[reward]` table of config.toml, and the loss's
/// `mode`, which decides whether the teacher's top-k is needed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default, deny_unknown_fields)]
pub struct OpdRewardConfig {
    /// The loss mode (the top-level `mode` key): `topk` makes the reward ask the teacher for
    /// its top-k at every response position.
    #[serde(skip)]
    pub mode: Mode,
    /// Also run the binary-RL judge's votes on each turn and record their majority as
    /// `eval_score` in the metadata (monitoring only; it does not change the sample).
    pub eval_votes: bool,
    /// Teacher top-k entries per response token in `topk` mode when the run asks for none
    /// (`--distill-topk 0`); 0 makes such a turn an error instead.
    pub default_topk: u32,
    /// The most characters of the response, and of the next state, the judge reads; longer
    /// text loses its middle. 0: no limit.
    pub max_judge_chars: usize,
}

impl Default for OpdRewardConfig {
    fn default() -> Self {
        OpdRewardConfig {
            mode: Mode::Token,
            eval_votes: false,
            default_topk: 50,
            max_judge_chars: DEFAULT_MAX_JUDGE_CHARS,
        }
    }
}

/// The whole file as the reward reads it: of the loss's keys only `mode` matters to it.
#[derive(Default, Deserialize)]
#[serde(crate = "openclaw_plugin_api::serde", default)]
struct RewardFile {
    mode: Mode,
    reward: OpdRewardConfig,
}

impl OpdRewardConfig {
    /// Parses and validates TOML text (the `[reward]` table and `mode`); missing keys keep
    /// their defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: RewardFile = parse_config(text)?;
        let config = OpdRewardConfig {
            mode: file.mode,
            ..file.reward
        };
        config.validate()?;
        Ok(config)
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
                tis_cap: 2.0,
                ..OpdConfig::default()
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
    fn the_loss_and_the_reward_ignore_each_other() {
        let text = "mode = \"topk\"\n[reward]\neval_votes = true\nmax_judge_chars = 0\n\
                    [run]\nmajority_vote_n = 1";
        assert_eq!(OpdConfig::parse(text).unwrap().mode, Mode::Topk);
        assert_eq!(
            OpdRewardConfig::parse(text).unwrap(),
            OpdRewardConfig {
                mode: Mode::Topk,
                eval_votes: true,
                default_topk: 50,
                max_judge_chars: 0
            }
        );
        let e = OpdRewardConfig::parse("[reward]\neval_vote = true").unwrap_err();
        assert!(e.contains("eval_vote") && e.contains("line 2"), "{e}");
        // `mode` is a loss key: it is not accepted inside [reward].
        let e = OpdRewardConfig::parse("[reward]\nmode = \"topk\"").unwrap_err();
        assert!(e.contains("mode"), "{e}");
        let e = OpdConfig::parse("[rewards]\neval_votes = true").unwrap_err();
        assert!(e.contains("rewards"), "{e}");
        // A bad reward value does not stop the loss, and the other way round.
        OpdConfig::parse("[reward]\nmax_judge_chars = 3").unwrap();
        OpdRewardConfig::parse("eps_clip = 7.0").unwrap();
    }

    #[test]
    fn reward_keys_parse_and_errors_name_the_key_and_the_value() {
        assert_eq!(
            OpdRewardConfig::parse(DEFAULT_CONFIG).unwrap(),
            OpdRewardConfig::default()
        );
        assert_eq!(
            OpdRewardConfig::parse("").unwrap(),
            OpdRewardConfig::default()
        );
        for (text, needle) in [
            (
                "[reward]\nmax_judge_chars = 50",
                "reward.max_judge_chars = 50",
            ),
            ("[reward]\neval_votes = \"yes\"", "eval_votes = \"yes\""),
            ("[reward]\ndefault_topk = -3", "default_topk = -3"),
            ("mode = \"sequence\"", "sequence"),
        ] {
            let e = OpdRewardConfig::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
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
