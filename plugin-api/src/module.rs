//! The root module every plugin library exports: a manifest function and one optional
//! constructor per kind.

use crate::ffi::{Constructor, EnvBox, GenerateBox, LossBox, RewardBox, RolloutBox};
use crate::host::FfiHostBox;
use crate::loss::LossInputs;
use crate::manifest::Manifest;
use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::{RResult, RString};
use abi_stable::{declare_root_module_statics, package_version_strings, StableAbi};

/// The name under which the root module is registered; also the base name abi_stable uses.
pub const ABI_NAME: &str = "openclaw_plugin";

/// The root module of a plugin library.
///
/// `manifest` is the last prefix field: every library has it. The constructors come after it,
/// so a host reads them as optional, and new kinds are appended at the end in later 1.x
/// releases without breaking libraries built against an earlier 1.x: the host sees a missing
/// field as a kind the library does not provide.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModuleRef)))]
#[sabi(missing_field(option))]
pub struct PluginModule {
    /// Returns the manifest; has no side effects.
    #[sabi(last_prefix_field)]
    pub manifest: extern "C" fn() -> RResult<Manifest, RString>,
    /// Builds the loss.
    pub loss: Option<extern "C" fn(RString, FfiHostBox) -> RResult<LossBox, RString>>,
    /// Builds the reward plugin.
    pub reward: Option<extern "C" fn(RString, FfiHostBox) -> RResult<RewardBox, RString>>,
    /// Builds the rollout function.
    pub rollout: Option<extern "C" fn(RString, FfiHostBox) -> RResult<RolloutBox, RString>>,
    /// Builds the generate function.
    pub generate: Option<extern "C" fn(RString, FfiHostBox) -> RResult<GenerateBox, RString>>,
    /// Builds the environment.
    pub env: Option<extern "C" fn(RString, FfiHostBox) -> RResult<EnvBox, RString>>,
    /// What the loss reads under a configuration (appended in 1.1; a 1.0 library lacks it).
    pub loss_inputs: Option<extern "C" fn(RString) -> RResult<LossInputs, RString>>,
}

impl RootModule for PluginModuleRef {
    declare_root_module_statics! {PluginModuleRef}
    const BASE_NAME: &'static str = ABI_NAME;
    const NAME: &'static str = ABI_NAME;
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

impl PluginModuleRef {
    /// The loss constructor, if the library has one.
    pub fn loss_ctor(self) -> Option<Constructor<LossBox>> {
        self.loss().flatten()
    }
    /// The reward constructor, if the library has one.
    pub fn reward_ctor(self) -> Option<Constructor<RewardBox>> {
        self.reward().flatten()
    }
    /// The rollout constructor, if the library has one.
    pub fn rollout_ctor(self) -> Option<Constructor<RolloutBox>> {
        self.rollout().flatten()
    }
    /// The generate constructor, if the library has one.
    pub fn generate_ctor(self) -> Option<Constructor<GenerateBox>> {
        self.generate().flatten()
    }
    /// The env constructor, if the library has one.
    pub fn env_ctor(self) -> Option<Constructor<EnvBox>> {
        self.env().flatten()
    }
    /// What the library's loss reads, if the library states it (API 1.1 and later).
    pub fn loss_inputs_fn(self) -> Option<extern "C" fn(RString) -> RResult<LossInputs, RString>> {
        self.loss_inputs().flatten()
    }
}
