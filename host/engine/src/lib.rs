//! The policy engine: models, weights, generation and scoring. Knows nothing of RL.
//!
//! - [`config`]: the HF `config.json` of Qwen3 / Qwen2 / Llama models.
//! - [`model`]: the decoder, generic over the burn backend.
//! - [`weights`]: safetensors loading (single or sharded, f32/bf16/f16), saving, random init;
//!   Llama models from llama.cpp GGUF files.
//! - [`generate`](mod@generate): batched generation with per-sequence KV caches and exact token logprobs.
//! - [`score`](mod@score): logprobs of given tokens (and the differentiable form for training).
//! - [`classify`](mod@classify): sequence-classification heads (PRMs).
//! - [`lora`]: LoRA adapters on the projections: attaching, merging, PEFT adapter files.
//! - [`publish`]: atomic weight publication with versions.
//! - [`device`]: CPU or CUDA from `ROLLOUT_GPUS` / `TRAIN_GPUS`.
//! - [`bench`](mod@bench): the engine benchmark behind `openclaw-host bench engine`.

#![warn(missing_docs)]

pub mod adapters;
pub mod bench;
pub mod classify;
pub mod config;
pub mod device;
pub mod generate;
pub mod kernels;
pub mod lora;
pub mod model;
pub mod publish;
pub mod quant;
pub mod rng;
pub mod score;
pub mod weights;

pub use classify::classify;
pub use config::{Architecture, AttentionFlags, ModelConfig};
pub use device::{CpuBackend, CpuDevice, DeviceChoice};
pub use generate::{
    generate, generate_parallel, ContextLengthExceeded, DecodeBatch, Detokenizer, FinishReason,
    GenerateRequest, Generation, PrefixCache, PrefixCacheOptions, PrefixCacheStats, SamplingParams,
    StopMatch, TokenEvent,
};
pub use model::Model;
pub use publish::{Published, Versioned};
pub use score::{score, token_logprobs, ScoreOptions, ScoreRequest, ScoreResult};
pub use weights::gguf::load_gguf_model;
pub use weights::{
    load_model, load_model_with, random_model, save_model, GgufWeights, LoadConfig, SaveDtype,
    SaveOptions,
};
