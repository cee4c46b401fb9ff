//! Data formats users read and write: trajectories (the buffer's export, offline training).

pub mod messages;
pub mod trajectory;
