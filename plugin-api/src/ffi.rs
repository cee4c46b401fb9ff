//! The FFI side of the plugin kinds: FFI-safe trait objects, the adapters that wrap a plugin's
//! plain Rust implementation in them, and the generic constructors the root module points to.
//!
//! A plugin author never touches this module; [`export_plugin!`](crate::export_plugin) does.
//! Every call is guarded: a panic inside the plugin becomes an `RErr` with the panic's message,
//! because a panic that unwinds across `extern "C"` aborts the host.

use crate::conversation::TrainingSample;
use crate::env::{Action, Env, Evaluation, Observation, StepOutcome, Task};
pub use crate::guard::{guard, panic_message};
use crate::host::{FfiHostBox, HostServices};
use crate::loss::{Loss, LossBatch, LossInputs, LossOutput};
use crate::reward::{Reward, Score, ScoreRequest};
use crate::rollout::{Generate, GenerateRequest, Rollout, RolloutOutput, RolloutRequest};
use abi_stable::sabi_trait;
use abi_stable::std_types::{RBox, RResult, RString, RVec, Tuple2};

/// A loss as it crosses the boundary.
#[sabi_trait]
pub trait FfiLoss: Send + Sync {
    /// Computes the loss and its gradient.
    #[sabi(last_prefix_field)]
    fn compute(&self, batch: &LossBatch) -> RResult<LossOutput, RString>;
}

/// A reward plugin as it crosses the boundary.
#[sabi_trait]
pub trait FfiReward: Send + Sync {
    /// Scores one turn.
    #[sabi(last_prefix_field)]
    fn score(&self, request: &ScoreRequest) -> RResult<Score, RString>;
}

/// A rollout function as it crosses the boundary.
#[sabi_trait]
pub trait FfiRollout: Send + Sync {
    /// Produces one batch.
    #[sabi(last_prefix_field)]
    fn rollout(&self, request: &RolloutRequest) -> RResult<RolloutOutput, RString>;
}

/// A generate function as it crosses the boundary.
#[sabi_trait]
pub trait FfiGenerate: Send + Sync {
    /// Generates for one prompt.
    #[sabi(last_prefix_field)]
    fn generate(&self, request: &GenerateRequest) -> RResult<RVec<TrainingSample>, RString>;
}

/// An environment as it crosses the boundary.
#[sabi_trait]
pub trait FfiEnv: Send + Sync {
    /// The tasks of a split.
    fn tasks(&self, split: RString) -> RResult<RVec<Task>, RString>;
    /// Starts an episode.
    fn reset(&self, task: &Task, seed: u64) -> RResult<Tuple2<u64, Observation>, RString>;
    /// Applies an action.
    fn step(&self, episode: u64, action: &Action) -> RResult<StepOutcome, RString>;
    /// Ends an episode.
    #[sabi(last_prefix_field)]
    fn close(&self, episode: u64) -> RResult<(), RString>;
    /// Scores an episode (appended in 1.2: a library built against 1.1 has no such entry and
    /// answers with this body).
    fn evaluate(&self, episode: u64) -> RResult<Evaluation, RString> {
        let _ = episode;
        RResult::RErr(crate::env::NO_EVALUATE.into())
    }
    /// A task's reference solution (appended in 1.4, as are `problems`).
    fn reference(&self, task: &Task) -> RResult<RVec<Action>, RString> {
        let _ = task;
        RResult::RErr(crate::env::NO_REFERENCE.into())
    }
    /// The tasks that could not be loaded.
    fn problems(&self) -> RVec<RString> {
        RVec::new()
    }
}

/// A boxed [`FfiLoss`].
pub type LossBox = FfiLoss_TO<'static, RBox<()>>;
/// A boxed [`FfiReward`].
pub type RewardBox = FfiReward_TO<'static, RBox<()>>;
/// A boxed [`FfiRollout`].
pub type RolloutBox = FfiRollout_TO<'static, RBox<()>>;
/// A boxed [`FfiGenerate`].
pub type GenerateBox = FfiGenerate_TO<'static, RBox<()>>;
/// A boxed [`FfiEnv`].
pub type EnvBox = FfiEnv_TO<'static, RBox<()>>;

/// Wraps a plugin's plain Rust implementation so it can cross the boundary.
pub struct Adapter<T>(pub T);

impl<T: Loss> FfiLoss for Adapter<T> {
    fn compute(&self, batch: &LossBatch) -> RResult<LossOutput, RString> {
        guard("loss.compute", || self.0.compute(batch))
    }
}

impl<T: Reward> FfiReward for Adapter<T> {
    fn score(&self, request: &ScoreRequest) -> RResult<Score, RString> {
        guard("reward.score", || self.0.score(request))
    }
}

impl<T: Rollout> FfiRollout for Adapter<T> {
    fn rollout(&self, request: &RolloutRequest) -> RResult<RolloutOutput, RString> {
        guard("rollout.rollout", || self.0.rollout(request))
    }
}

impl<T: Generate> FfiGenerate for Adapter<T> {
    fn generate(&self, request: &GenerateRequest) -> RResult<RVec<TrainingSample>, RString> {
        guard("generate.generate", || self.0.generate(request))
    }
}

impl<T: Env> FfiEnv for Adapter<T> {
    fn tasks(&self, split: RString) -> RResult<RVec<Task>, RString> {
        guard("env.tasks", || self.0.tasks(&split))
    }
    fn reset(&self, task: &Task, seed: u64) -> RResult<Tuple2<u64, Observation>, RString> {
        guard("env.reset", || {
            self.0.reset(task, seed).map(|(id, obs)| Tuple2(id, obs))
        })
    }
    fn step(&self, episode: u64, action: &Action) -> RResult<StepOutcome, RString> {
        guard("env.step", || self.0.step(episode, action))
    }
    fn close(&self, episode: u64) -> RResult<(), RString> {
        guard("env.close", || self.0.close(episode))
    }
    fn evaluate(&self, episode: u64) -> RResult<Evaluation, RString> {
        guard("env.evaluate", || self.0.evaluate(episode))
    }
    fn reference(&self, task: &Task) -> RResult<RVec<Action>, RString> {
        guard("env.reference", || self.0.reference(task).map(RVec::from))
    }
    fn problems(&self) -> RVec<RString> {
        match guard::<_, Vec<String>>("env.problems", || Ok(self.0.problems())) {
            RResult::ROk(v) => v.into_iter().map(RString::from).collect(),
            RResult::RErr(e) => {
                RVec::from(vec![format!("listing the broken tasks failed: {e}").into()])
            }
        }
    }
}

/// The signature of every constructor in the root module: the configuration as TOML text and
/// the host's services in, the plugin object out.
pub type Constructor<B> = extern "C" fn(RString, FfiHostBox) -> RResult<B, RString>;

/// Builds a plugin object inside a guard: a constructor that panics returns an error.
fn construct<T, B>(
    what: &str,
    config: RString,
    host: FfiHostBox,
    new: impl FnOnce(&str, HostServices) -> Result<T, String>,
    wrap: impl FnOnce(Adapter<T>) -> B,
) -> RResult<B, RString> {
    guard(what, || {
        new(&config, HostServices::from_ffi(host)).map(|t| wrap(Adapter(t)))
    })
}

/// The loss constructor for `T`.
pub extern "C" fn new_loss<T: Loss>(
    config: RString,
    host: FfiHostBox,
) -> RResult<LossBox, RString> {
    construct("loss constructor", config, host, T::new, |a| {
        FfiLoss_TO::from_value(a, sabi_trait::TD_Opaque)
    })
}

/// The inputs `T` reads under a configuration, without constructing it.
pub extern "C" fn loss_inputs<T: Loss>(config: RString) -> RResult<LossInputs, RString> {
    guard("loss inputs", || T::inputs(&config))
}

/// The reward constructor for `T`.
pub extern "C" fn new_reward<T: Reward>(
    config: RString,
    host: FfiHostBox,
) -> RResult<RewardBox, RString> {
    construct("reward constructor", config, host, T::new, |a| {
        FfiReward_TO::from_value(a, sabi_trait::TD_Opaque)
    })
}

/// The rollout constructor for `T`.
pub extern "C" fn new_rollout<T: Rollout>(
    config: RString,
    host: FfiHostBox,
) -> RResult<RolloutBox, RString> {
    construct("rollout constructor", config, host, T::new, |a| {
        FfiRollout_TO::from_value(a, sabi_trait::TD_Opaque)
    })
}

/// The generate constructor for `T`.
pub extern "C" fn new_generate<T: Generate>(
    config: RString,
    host: FfiHostBox,
) -> RResult<GenerateBox, RString> {
    construct("generate constructor", config, host, T::new, |a| {
        FfiGenerate_TO::from_value(a, sabi_trait::TD_Opaque)
    })
}

/// The env constructor for `T`.
pub extern "C" fn new_env<T: Env>(config: RString, host: FfiHostBox) -> RResult<EnvBox, RString> {
    construct("env constructor", config, host, T::new, |a| {
        FfiEnv_TO::from_value(a, sabi_trait::TD_Opaque)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_panics_into_errors_with_their_message() {
        let r: RResult<u32, RString> =
            guard("thing", || -> Result<u32, String> { panic!("boom {}", 7) });
        let msg = r.into_result().unwrap_err();
        assert!(msg.starts_with("thing panicked at "), "{msg}");
        assert!(msg.ends_with(": boom 7"), "{msg}");
        assert!(msg.contains("ffi.rs"), "{msg}");
        let r: RResult<u32, RString> = guard("thing", || Err::<u32, _>("nope".to_string()));
        assert_eq!(r.into_result().unwrap_err().as_str(), "nope");
        let r: RResult<u32, RString> = guard("thing", || Ok(3u32));
        assert_eq!(r.into_result().unwrap(), 3);
    }

    /// An environment with step rewards only, which keeps `evaluate`'s default.
    struct Steps;

    impl Env for Steps {
        fn new(_: &str, _: HostServices) -> Result<Self, String> {
            Ok(Steps)
        }
        fn tasks(&self, _: &str) -> Result<Vec<Task>, String> {
            Ok(Vec::new())
        }
        fn reset(&self, _: &Task, _: u64) -> Result<(u64, Observation), String> {
            Ok((1, Observation::default()))
        }
        fn step(&self, _: u64, _: &Action) -> Result<StepOutcome, String> {
            Ok(StepOutcome::default())
        }
        fn close(&self, _: u64) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn an_env_without_evaluate_says_so_across_the_boundary() {
        let env: EnvBox = FfiEnv_TO::from_value(Adapter(Steps), sabi_trait::TD_Opaque);
        let said = env.evaluate(1).into_result().unwrap_err();
        assert_eq!(said.as_str(), crate::env::NO_EVALUATE);
    }
}
