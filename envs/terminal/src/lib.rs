//! The terminal environment: tasks in the terminal-bench 1.x layout done with the original's
//! shell tools inside the bubblewrap sandbox, scored by the task's pytest suite after the loop.
//!
//! An episode: `reset` prepares a private `/app` (the task's `setup.sh`, run in the sandbox)
//! and gives the original's first message, `Task name:{name}\nTask instruction: {…}`, with
//! the tools' schemas. Each `step` takes an assistant message and runs its calls:
//! `shell_exec` (blocking, or a background process with `block=false`), `shell_view`,
//! `shell_write_to_process` and `shell_write_content_to_file`. A message without calls ends
//! the episode; `max_turns` messages cut it off; `max_parse_errors` unreadable calls end it.
//! `evaluate` (after the loop, also when it was cut off) shows the task's `tests/` and
//! `run-tests.sh` read-only at `/tests` to one more sandboxed command, `bash
//! /tests/run-tests.sh`, and scores the share of tests its pytest summary says passed.
//!
//! Every call is a fresh sandbox over the episode's `/app`: files stay, a session's working
//! directory is carried to its next command, but processes and shell variables are not (a
//! background process lives in its own sandbox, so a service one session starts cannot be
//! reached from another; the tasks' tests start the services they check). Without bubblewrap
//! the environment refuses to start.

mod env;
pub mod grade;
pub mod tasks;
pub mod tools;

pub use env::{Config, TerminalEnv, APP, DEFAULT_CONFIG};

openclaw_plugin_api::export_plugin! {
    name: "terminal",
    description: "Terminal environment: terminal-bench 1.x style tasks done with shell tools (shell_exec, shell_view, shell_write_to_process, shell_write_content_to_file) in the bubblewrap sandbox, reward = share of the task's pytest tests passed",
    default_config: include_str!("../config.toml"),
    env: TerminalEnv,
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
