//! The host side of training: trainer settings from the run configuration, training samples
//! from recorded or hand-written turns, and a training session that steps, logs, checkpoints
//! and publishes. `train`, `sft` and `run` share it.

pub mod adapters;
pub mod episodes;
pub mod plugin_lock;
pub mod samples;
pub mod session;
pub mod settings;

pub use adapters::UserAdapters;
pub use samples::{sample_from, turn_from_record, TurnTokens};
pub use session::{SessionOptions, TrainSession, RUN_STATE_FILE};
pub use settings::{last_step, session_options, train_config};
