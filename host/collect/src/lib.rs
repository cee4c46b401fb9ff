//! Collection: sessions, main and side turns, next states, and the recorder that makes them
//! durable before anything else sees them; each served turn opened and recorded ([`turns`]).

pub mod recorder;
pub mod sessions;
pub mod turns;

pub use recorder::{CollectEvent, FeedbackFate, Recorder, Sampled};
pub use sessions::{
    user_session_id, valid_session_id, Assignment, Closed, SessionHints, SessionTracker,
    TrackerOptions,
};
pub use turns::{
    AdapterTurns, Answer, FeedbackBy, FeedbackError, FeedbackTarget, TurnDesk, TurnError,
};
