//! The served policy: a model directory loaded into the engine, the generation thread, and the
//! `Policy` service plugins call.

pub mod engine;
pub mod files;
pub mod scheduler;

pub use engine::{ModelFiles, PolicyEngine, Prompt};
pub use files::tokenizer_and_template;
pub use scheduler::{Busy, GenEvent, Scheduler, SchedulerOptions};
