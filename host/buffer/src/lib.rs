//! The durable buffer every loop writes through: turns, next states, judgements and samples,
//! appended before they are acknowledged downstream, replayed after a crash; the trajectory
//! files it exports and `train --data-path` reads; the one conversion of chat messages to the
//! ABI's; and the lock that keeps one writer per directory.

pub mod dir_lock;
pub mod export;
pub mod log;
pub mod messages;
pub mod record;
pub mod testing;
pub mod trajectory;

pub use log::{FsyncPolicy, Log, LogOptions, Replay};
pub use record::{Envelope, Record};
