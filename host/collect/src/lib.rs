//! Collection: sessions, main and side turns, next states, and the recorder that makes them
//! durable before anything else sees them.

pub mod recorder;
pub mod sessions;

pub use recorder::{CollectEvent, Recorder};
pub use sessions::{
    valid_session_id, Assignment, Closed, SessionHints, SessionTracker, TrackerOptions,
};
