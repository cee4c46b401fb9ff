//! The `openclaw-host` library: the run as a library (`pipeline`: serving, producers, judging,
//! training), the loops' parts, configuration, plugins, the backend choice and the command line.
//! ARCHITECTURE.md at the repository root has the code map and the invariants.
//!
//! Arrows point down: the command line uses the pipeline, configuration and plugins; plugins
//! know nothing of the host.

pub mod access;
pub mod backend;
pub mod buffer;
pub mod cli;
pub mod collect;
pub mod config;
pub mod data;
pub mod default_model;
pub mod dir_lock;
pub mod env_pool;
pub mod episodes;
pub mod eval;
pub mod judge;
pub mod metrics;
pub mod pipeline;
pub mod plugin;
pub mod policy;
pub mod report;
pub mod serve;
pub mod simulate;
pub mod training;
