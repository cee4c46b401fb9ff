//! What a plugin says about itself, before anything is constructed.

use abi_stable::std_types::{RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The self-description a plugin library returns from its manifest function. Building it has
/// no side effects, so the host may call it on any library it finds.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The plugin's name, unique among loaded plugins (`binary-rl`, `opd`, ...).
    pub name: RString,
    /// The plugin's own version (semver), independent of the ABI version.
    pub version: RString,
    /// The kinds this library can construct, as names (`loss`, `reward`, ...). Names rather
    /// than an enum so a host can read a manifest that names a kind it does not know yet.
    pub kinds: RVec<RString>,
    /// One line that says what the plugin does.
    pub description: RString,
    /// The plugin's default configuration, as TOML text.
    pub default_config: RString,
}

impl Manifest {
    /// The kinds this manifest claims that this version of the API knows.
    pub fn known_kinds(&self) -> Vec<PluginKind> {
        self.kinds
            .iter()
            .filter_map(|k| k.as_str().parse().ok())
            .collect()
    }

    /// Whether the manifest claims `kind`.
    pub fn has_kind(&self, kind: PluginKind) -> bool {
        self.kinds.iter().any(|k| k.as_str() == kind.as_str())
    }
}

/// A kind of plugin: one constructor in the root module each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// A loss: per-token numbers in, loss value and dL/dlogp out.
    Loss,
    /// A reward model or judge: a turn and its next state in, a score (and hint) out.
    Reward,
    /// A rollout function: drives the policy to produce a batch of training samples.
    Rollout,
    /// A custom generate function: one prompt in, one or more samples out.
    Generate,
    /// An environment: tasks, observations, actions and rewards.
    Env,
}

impl PluginKind {
    /// Every kind, in the order of the root module's constructors.
    pub const ALL: [PluginKind; 5] = [
        PluginKind::Loss,
        PluginKind::Reward,
        PluginKind::Rollout,
        PluginKind::Generate,
        PluginKind::Env,
    ];

    /// The kind's name as written in manifests, `plugin.toml` and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Loss => "loss",
            PluginKind::Reward => "reward",
            PluginKind::Rollout => "rollout",
            PluginKind::Generate => "generate",
            PluginKind::Env => "env",
        }
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PluginKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PluginKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s.trim())
            .ok_or_else(|| {
                format!(
                    "unknown plugin kind `{s}` (expected one of: loss, reward, rollout, generate, env)"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for k in PluginKind::ALL {
            assert_eq!(k.as_str().parse::<PluginKind>().unwrap(), k);
        }
        let err = "lose".parse::<PluginKind>().unwrap_err();
        assert!(err.contains("`lose`"), "{err}");
    }

    #[test]
    fn unknown_kind_names_are_kept_but_not_known() {
        let m = Manifest {
            name: "x".into(),
            version: "0.1.0".into(),
            kinds: vec![RString::from("loss"), RString::from("telepathy")].into(),
            description: "d".into(),
            default_config: "".into(),
        };
        assert_eq!(m.known_kinds(), vec![PluginKind::Loss]);
        assert!(m.has_kind(PluginKind::Loss));
        assert!(!m.has_kind(PluginKind::Env));
    }
}
