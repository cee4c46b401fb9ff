//! The tool-call environment (ReTool-style): the agent solves a problem, running Python through
//! the `code_interpreter` tool inside the bubblewrap sandbox, and ends with
//! `Answer: \boxed{…}`; after the loop the last boxed answer is compared strictly with the
//! label (+1, else -1 or the original's softer penalty).
//!
//! An episode: `reset` gives the problem, templated once, and the tool's schema; each `step`
//! takes an assistant message. A message with a boxed answer ends the episode; one with calls
//! gets their output back as tool messages (`<interpreter>…</interpreter>`, cut to
//! `output_chars`); one with neither ends the episode too (the agent stopped without an
//! answer). `max_turns` messages cut an episode off (truncated); calls past `max_tool_calls`
//! get an error instead of output. Every call runs in a fresh sandbox process in the episode's
//! own work directory, with no network and the configured limits; without bubblewrap the
//! environment refuses to start.

pub mod answer;
mod env;
pub mod tools;

pub use env::{Config, ToolcallEnv, DEFAULT_CONFIG};

openclaw_plugin_api::export_plugin! {
    name: "toolcall",
    description: "Tool-call environment (ReTool-style): problems solved with a sandboxed Python code_interpreter, reward +1 for the right last boxed answer",
    default_config: include_str!("../config.toml"),
    env: ToolcallEnv,
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
