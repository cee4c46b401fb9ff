//! The rollout and generate kinds: user code that drives the policy to make samples.

use crate::conversation::{Message, SamplingParams, TrainingSample};
use crate::loss::Metric;
use abi_stable::std_types::{RString, RVec};
use abi_stable::StableAbi;
use serde::{Deserialize, Serialize};

/// A request for one batch of samples.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutRequest {
    /// Increments with every rollout of the run.
    pub rollout_id: u64,
    /// The number of samples (or groups) the trainer wants.
    pub batch_size: u32,
    /// Samples per prompt, for group-relative advantages.
    pub samples_per_prompt: u32,
    /// Whether this is an evaluation rollout (nothing is trained).
    pub evaluation: bool,
}

/// A batch of samples, with metrics to log.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RolloutOutput {
    /// The samples.
    pub samples: RVec<TrainingSample>,
    /// Metrics about the rollout.
    pub metrics: RVec<Metric>,
}

/// A request to a custom generate function.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerateRequest {
    /// The prompt messages.
    pub messages: RVec<Message>,
    /// The tools, as an OpenAI `tools` JSON array (empty for none).
    pub tools_json: RString,
    /// How to sample.
    pub sampling: SamplingParams,
    /// Whether this is an evaluation.
    pub evaluation: bool,
    /// Task data (label, metadata), as JSON text.
    pub metadata_json: RString,
}

/// A rollout function, written in plain Rust: it uses the host's `Policy` to produce a batch.
pub trait Rollout: Send + Sync + 'static {
    /// Builds the rollout function from its configuration and the host's services.
    fn new(config: &str, host: crate::HostServices) -> crate::PluginResult<Self>
    where
        Self: Sized;

    /// Produces one batch.
    fn rollout(&self, request: &RolloutRequest) -> crate::PluginResult<RolloutOutput>;
}

/// A custom generate function: one prompt in, one sample or several (one per agent step) out.
pub trait Generate: Send + Sync + 'static {
    /// Builds the generate function from its configuration and the host's services.
    fn new(config: &str, host: crate::HostServices) -> crate::PluginResult<Self>
    where
        Self: Sized;

    /// Generates for one prompt.
    fn generate(&self, request: &GenerateRequest) -> crate::PluginResult<Vec<TrainingSample>>;
}
