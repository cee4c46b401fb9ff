//! Environments served over HTTP, so episodes scale out to other machines: `env-pool serve`
//! hosts an environment plugin behind the lease protocol ([`server`]), and `--env-pool-url`
//! makes `run` and `eval` use one or more such pools instead of a plugin loaded here
//! ([`client`]).
//!
//! The protocol is the original's terminal pool (JSON POST everywhere, replies
//! `{"ok": bool, "error"?, ...}`): `/allocate {task_key, request_id}` (idempotent on the pair;
//! HTTP 429 with `code` `RUN_SLOTS_EXHAUSTED` or `TASK_SLOTS_EXHAUSTED` when full),
//! `/heartbeat`, `/reset`, `/exec_tool {lease_id, tool_call: {name, arguments}}`, `/evaluate`,
//! `/close`, with idle leases reaped. This host's pools add `/step` (one whole assistant
//! message, as the env ABI's `step`) and `GET /tasks`; the client uses them where `GET /status`
//! names this protocol and falls back to `/exec_tool` for the original's workers.
//!
//! The original's SWE and GUI pools speak dialects of their own ([`swe`], [`gui`]): a pool
//! here serving `swe` or `gui` answers them too, and the client speaks them when
//! `--env-pool-dialect` says so ([`client::Dialect`]).

pub mod client;
pub mod gui;
pub mod server;
pub mod swe;

pub use client::{Dialect, RemoteEnv};

/// What this host's pools say they speak in `GET /status`.
pub const PROTOCOL: &str = "openclaw-host-env-pool/1";
