//! The lab: the built-in default model and its recipe, simulated users that drive the run with
//! the default, and the learning-curve and evaluation plots. Measurement and demonstration;
//! serving and training do not depend on it.

pub mod default_model;
pub mod report;
pub mod simulate;
