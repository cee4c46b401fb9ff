//! The GUI environment: web pages the environment serves itself on loopback, acted on in
//! headless Chromium over WebDriver with the original's `computer_use` tool, and scored by each
//! task's check of the page's final state.
//!
//! At start it unpacks the task set (the built-in one, compiled in, or `tasks_dir`), serves it
//! on `127.0.0.1` ([`serve`]) and starts one chromedriver ([`browser`]; Debian's `chromium`
//! and `chromium-driver`, refused with what to install when missing). Each episode is its own
//! WebDriver session (its own Chromium, profile and pointer): `reset` opens the task's start
//! page in a viewport of `width` x `height` CSS pixels at device scale 1 (no network but
//! loopback), and answers with the instruction, the page's accessibility tree as text
//! ([`ax`]; each element with its center on the 0..999 grid) and a note of the screenshot, a
//! PNG kept in the episode's folder (`step-000.png`, its path in each step's metadata). Each
//! `step` reads the `computer_use` calls of an assistant message (OpenAI `tool_calls`, or
//! `<tool_call>` blocks), carries them out as W3C input actions ([`actions`]: key, type,
//! mouse_move, the clicks, left_click_drag, scroll, hscroll, wait, terminate, on the 0..999
//! grid scaled to the viewport) and answers each with a tool message, the last one with the
//! page as it is then. `terminate` ends the episode, as do `max_parse_errors` unreadable calls
//! (a message without a call counts as one) and the task's `max_steps` (cut to `max_turns`;
//! truncated). `evaluate` runs the task's check (a JavaScript expression) in the page: truthy
//! gives 1, else 0.
//!
//! Every WebDriver call has `action_seconds`: a browser that does not answer in time (a page
//! stuck in a loop) or has crashed ends only its own episode (done and truncated, with why in
//! the metadata; `evaluate` gives 0 and says why), and its processes are killed at once.

pub mod actions;
pub mod ax;
pub mod browser;
mod env;
pub mod serve;
pub mod tasks;

pub use env::{Config, GuiEnv, DEFAULT_CONFIG};

openclaw_plugin_api::export_plugin! {
    name: "gui",
    description: "GUI environment: web pages served on loopback, acted on in headless Chromium over WebDriver with the computer_use tool (key, type, mouse_move, clicks, drag, scroll, hscroll, wait, terminate on a 0..999 grid), reward = the task's check of the page's final state (1 or 0)",
    default_config: include_str!("../config.toml"),
    env: GuiEnv,
}

#[cfg(test)]
mod tests {
    use openclaw_plugin_api::serde_json::Value;

    #[test]
    fn the_manifest_agrees_with_plugin_toml() {
        let m = super::__openclaw_plugin_manifest().unwrap();
        openclaw_plugin_api::testing::assert_manifest_matches(
            &m,
            include_str!("../plugin.toml"),
            env!("CARGO_PKG_VERSION"),
        );
    }

    #[test]
    fn the_default_configuration_is_the_configs_defaults_and_checks() {
        let cfg: super::Config =
            openclaw_plugin_api::parse_config_section(super::DEFAULT_CONFIG, "env").unwrap();
        let d = super::Config::default();
        let as_json = |c: &super::Config| -> Value {
            openclaw_plugin_api::serde_json::json!([
                c.tasks_dir,
                c.screenshot_backend,
                c.chromedriver,
                c.chromium,
                c.width,
                c.height,
                c.action_seconds,
                c.step_seconds,
                c.settle_ms,
                c.max_turns,
                c.max_parse_errors,
                c.ax_chars,
                c.screenshots_dir
            ])
        };
        assert_eq!(as_json(&cfg), as_json(&d));
    }
}
