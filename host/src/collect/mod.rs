//! Collection: sessions, main and side turns, next states.

pub mod sessions;

pub use sessions::{Assignment, Closed, SessionHints, SessionTracker, TrackerOptions};
