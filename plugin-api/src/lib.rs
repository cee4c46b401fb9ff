//! The stable plugin ABI of `openclaw-host`.
//!
//! A plugin is a `cdylib` crate that depends on this crate only. It implements one or more of
//! the plain Rust traits [`Loss`], [`Reward`], [`Rollout`], [`Generate`] and [`Env`], and
//! exports them with [`export_plugin!`]. The host loads the library at run time through
//! `abi_stable`, checks that it was built against a compatible version of this crate, and
//! calls it through FFI-safe trait objects. Only plain data crosses the boundary: `RVec<f32>`,
//! `RVec<u32>`, `RString` and flat per-token arrays with sample offsets; never a tensor.
//!
//! Rules that keep built plugins loadable across 1.x releases are written in CONTRIBUTING.md
//! at the repository root; in short, kinds are appended to the root module after its last
//! field, methods are appended to the host services after their last method, and data types
//! do not change their fields within a major version.

// abi_stable's `#[sabi_trait]` expands to impls inside a const block; the lint is about that
// generated code, not ours.
#![allow(non_local_definitions)]

pub mod config;
pub mod conversation;
pub mod env;
mod export;
pub mod ffi;
mod guard;
pub mod host;
pub mod loss;
pub mod manifest;
pub mod math;
pub mod module;
pub mod reward;
pub mod rollout;
pub mod surrogate;
#[cfg(feature = "testing")]
pub mod testing;

pub use abi_stable;
pub use serde;
pub use serde_json;
pub use toml;

pub use config::{parse_config, parse_config_section};
pub use conversation::{
    Message, NextState, SamplingParams, TopKEntries, TrainingSample, Trajectory, Turn, TurnType,
};
pub use env::{
    Action, Env, EnvInfo, Evaluation, Observation, StepOutcome, Task, NO_EVALUATE, NO_REFERENCE,
};
pub use host::{HostServices, Judge, JudgeRequest, LogLevel, Logger, Policy, ScoreTokens};
pub use loss::{Loss, LossBatch, LossInputs, LossOutput, Metric, TopKBatch};
pub use manifest::{Manifest, PluginKind};
pub use module::{PluginModule, PluginModuleRef, ABI_NAME};
pub use reward::{JudgeSettings, Reward, Score, ScoreRequest};
pub use rollout::{Generate, GenerateRequest, Rollout, RolloutOutput, RolloutRequest};

/// The error a plugin returns: a message the host logs with the plugin's name.
pub type PluginResult<T> = Result<T, String>;

/// The version of this crate, which is the ABI version the host checks at load time.
pub const API_VERSION: &str = env!("CARGO_PKG_VERSION");
