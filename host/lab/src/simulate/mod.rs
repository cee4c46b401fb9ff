//! Simulated users for the built-in default: threads that talk to the real server over HTTP
//! the way a person would (ask, read the answer, thank or correct), and a scoreboard of how
//! the first answers met their preference, by the weight version that wrote them.

pub mod scoreboard;
pub mod users;

pub use scoreboard::{FirstAnswer, Scoreboard, WindowStats};
pub use users::{SimUsers, SimUsersOptions};
