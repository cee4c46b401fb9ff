//! The world of the built-in default: tasks a user asks, answers in two styles, a simulated
//! user who prefers one of them and says so like a person, and the checks that score a run.
//!
//! Everything is deterministic given a seed, so runs and evaluations are comparable.

pub mod answers;
pub mod sft;
pub mod style;
pub mod tasks;
pub mod user;

pub use answers::{answer, Style};
pub use style::{classify, on_topic, Verdict};
pub use tasks::{Task, TaskKind, TaskSet};
pub use user::{Request, SimulatedUser, UserReply};
