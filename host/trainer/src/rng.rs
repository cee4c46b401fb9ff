//! The trainer's random numbers: the engine's SplitMix64, whose whole state (one `u64`)
//! checkpoints save.

pub use openclaw_engine::rng::Rng as SplitMix;
