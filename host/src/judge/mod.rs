//! Judges: the models the methods' reward plugins ask, and the pool that runs them.

pub mod endpoint;
pub mod pool;
pub mod rule;

pub use endpoint::{EndpointJudge, EndpointOptions};
