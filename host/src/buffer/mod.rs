//! The durable buffer every loop writes through: turns, next states, judgements and samples,
//! appended before they are acknowledged downstream, replayed after a crash.

pub mod export;
pub mod log;
pub mod record;

pub use log::{FsyncPolicy, Log, LogOptions, Replay};
pub use record::{Envelope, Record};
