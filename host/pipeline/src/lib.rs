//! The run as a library: [`Pipeline`] wires the four loops (or serving alone) from the
//! resolved configuration and the plugin set; [`PipelineHandle`] observes and stops them.
//!
//! - serving ([`serving`]): the policy engine, the durable buffer, the recorder and the session
//!   tracker behind the OpenAI server;
//! - producers ([`producer`]): live sessions and the replay of unfinished work, each feeding
//!   the same judge and training path (environment episodes are the next producer), and for
//!   `train` the passes over a scored trajectory file ([`dataset`]) straight to training;
//! - collection ([`collect`]): turns from the recorder wait for their next state (or their
//!   session's end), then go to the judge pool;
//! - the judge pool ([`openclaw_judge::pool`]): the method's reward plugin scores each turn;
//!   [`samples`] records the verdict and, for trainable turns, a training sample, durably,
//!   before handing the sample to training;
//! - training ([`train_loop`]): batches of ready samples, admission by staleness, a step
//!   through the loss plugin, weight publication to serving, checkpoints that record which
//!   samples were consumed.
//!
//! [`replay`] rebuilds the pending work from the durable buffer after a restart.
//!
//! Queues and what happens when one is full: recorder → collection (bounded; overflow is
//! counted and the event is left to the next replay, serving never waits); collection → judge
//! pool (bounded; collection waits); judge pool → training (bounded; judge workers wait). The
//! table of turns waiting for a next state is capped; the oldest are judged as if their
//! session had ended.

pub mod collect;
pub mod dataset;
pub mod env_episodes;
pub mod plugin_samples;
pub mod producer;
pub mod replay;
pub mod run;
pub mod samples;
pub mod serving;
mod stages;
pub mod train_loop;
pub mod training;

pub use collect::{Collection, CollectionOptions};

/// A one-token main turn with no next state, for the pipeline's unit tests.
pub use dataset::Dataset;
pub use env_episodes::{EnvEpisodes, EnvRunOptions, EpisodeStats, EpisodeWindow};
pub use producer::{Epochs, LiveSessions, Producer, Replayed, Sinks};
pub use replay::{replay, ReplayPlan};
pub use run::{EnvRun, Pipeline, PipelineHandle, ReplayCounts, Resumed};
pub use samples::SampleMaker;
pub use serving::Serving;
pub use train_loop::{
    ConsumedState, DataFile, StepEvent, TrainLoop, TrainLoopOptions, TrainSummary,
};
