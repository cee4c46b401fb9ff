//! Plugins: their `plugin.toml`, building them with cargo, loading them through the stable
//! ABI, calling them, scaffolding new ones and checking them against the contract.

pub mod api_source;
pub mod assign;
pub mod build;
pub mod discover;
pub mod harness;
pub mod install;
pub mod installed;
pub mod instance;
pub mod load;
pub mod lockfile;
pub mod manifest_file;
pub mod registry;
pub mod scaffold;
pub mod setup;
pub mod watch;

pub use instance::{EnvHandle, GenerateHandle, LossHandle, RewardHandle, RolloutHandle};
pub use load::LoadedPlugin;
pub use manifest_file::PluginToml;
pub use registry::Registry;
pub use setup::RunPlugins;
