//! The SWE environment: SWE-bench instances worked on as mini-swe-agent does, in the bubblewrap
//! sandbox, and resolved as SWE-bench resolves them.
//!
//! An episode: `reset` fetches the instance's base commit (and nothing after it) into a
//! private `/testbed` and gives the agent the issue with mini-swe-agent's rules. Each `step`
//! takes a reply with exactly one ```` ```bash ```` block and runs it in a fresh shell in
//! `/testbed` (no network, the sandbox's limits), answering with its return code and output;
//! a reply with none or several blocks gets the format reminder. A command whose output starts
//! with `COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` submits. `evaluate` (also after a cut-off
//! episode) takes the repository's diff against the base commit, leaves out its changes to
//! test files, applies it and the instance's `test_patch` to a fresh checkout, and runs
//! FAIL_TO_PASS and PASS_TO_PASS: resolved only if every one passes; its details carry the
//! repository's whole diff as `patch` (what a pool's `/diff` answers). An instance without
//! tests is refused when the set loads.

mod env;
pub mod instances;
pub mod protocol;
pub mod score;

pub use env::{Config, SweEnv, DEFAULT_CONFIG, TESTBED};

openclaw_plugin_api::export_plugin! {
    name: "swe",
    description: "SWE environment: SWE-bench instances (SWE_BENCH_PATH, or 22 built-in Python repositories) worked on as mini-swe-agent does, one bash block per reply in /testbed, in the bubblewrap sandbox; reward 1 when every FAIL_TO_PASS and PASS_TO_PASS test passes",
    default_config: include_str!("../config.toml"),
    env: SweEnv,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_manifest_agrees_with_plugin_toml() {
        let m = super::__openclaw_plugin_manifest().unwrap();
        openclaw_plugin_api::testing::assert_manifest_matches(
            &m,
            include_str!("../plugin.toml"),
            env!("CARGO_PKG_VERSION"),
        );
    }
}
