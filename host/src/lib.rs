//! The `openclaw-host` library: configuration, the plugin registry and the command line.
//!
//! Arrows point down: the command line uses configuration and plugins; plugins know nothing
//! of the command line.

pub mod backend;
pub mod buffer;
pub mod cli;
pub mod collect;
pub mod config;
pub mod data;
pub mod default_model;
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
