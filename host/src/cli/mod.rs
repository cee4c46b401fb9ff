//! The command line: parsing with clap and one module per command; no logic of its own beyond
//! printing.

mod buffer_cmd;
mod config_cmd;
pub mod flags;
mod plugins;

use clap::{Parser, Subcommand};
use openclaw_plugin_api::PluginKind;
use std::path::PathBuf;

/// The `openclaw-host` command line.
#[derive(Parser, Debug)]
#[command(
    name = "openclaw-host",
    version,
    about = "Serve a policy model, learn from the conversations it has, with methods as plugins"
)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List, inspect, scaffold and check plugins.
    Plugins {
        /// The plugins command.
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Print the fully resolved run configuration, each value annotated with its source.
    Config(flags::RunFlags),
    /// Read the durable buffer of recorded turns.
    Buffer {
        /// The buffer command.
        #[command(subcommand)]
        command: BufferCommand,
    },
}

/// The buffer commands.
#[derive(Subcommand, Debug)]
pub enum BufferCommand {
    /// Write the recorded sessions as trajectory JSONL (the format `train --data-path` reads).
    Export {
        /// The buffer directory.
        #[arg(long, default_value = "./rl_buffer", env = "RL_BUFFER_DIR")]
        rl_buffer_dir: PathBuf,
        /// The output file (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

/// The plugins commands.
#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// A table of plugin crates: name, version, kinds, built or not, path.
    List {
        /// Plugin crate directories or folders of them (default: methods/, examples/, envs/).
        dirs: Vec<PathBuf>,
    },
    /// A plugin's manifest and default configuration (builds and loads it).
    Info {
        /// A plugin name, crate directory or library file.
        plugin: String,
    },
    /// Scaffold a plugin crate that builds, loads and passes `plugins test` as written.
    New {
        /// The plugin's name (also its crate name).
        name: String,
        /// The kinds it provides, comma-separated: loss, reward, rollout, generate, env.
        #[arg(long, value_delimiter = ',', required = true, value_parser = parse_kind)]
        kind: Vec<PluginKind>,
        /// The folder to create it in.
        #[arg(long, default_value = ".")]
        dir: PathBuf,
    },
    /// Check a plugin against the contract on generated inputs.
    Test {
        /// A plugin name, crate directory or library file.
        plugin: String,
        /// A configuration file to construct it with (default: its own defaults).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

fn parse_kind(s: &str) -> Result<PluginKind, String> {
    s.parse()
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Plugins { command } => plugins::run(command),
        Command::Config(flags) => config_cmd::run(&flags),
        Command::Buffer { command } => buffer_cmd::run(command),
    }
}
