//! The run settings as command-line flags, generated from the settings table so that every
//! key has exactly one flag spelling (plus the aliases users of similar tools type).

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use openclaw_config::keys::{Kind, KEYS};
use openclaw_config::ConfigInputs;
use std::path::PathBuf;

/// `--config FILE`, `--set KEY=VALUE` and one flag per run setting.
#[derive(Clone, Debug, Default)]
pub struct RunFlags {
    /// The configuration file.
    pub config: Option<PathBuf>,
    /// `--set` assignments.
    pub sets: Vec<String>,
    /// (key, raw value, flag as spelled) for each setting given on the command line.
    pub values: Vec<(String, String, String)>,
}

impl RunFlags {
    /// The configuration inputs these flags make, with the process environment.
    pub fn inputs(&self) -> ConfigInputs {
        ConfigInputs {
            file: self.config.clone(),
            flags: self.values.clone(),
            sets: self.sets.clone(),
            env: Box::new(|k| std::env::var(k).ok()),
        }
    }
}

impl Args for RunFlags {
    fn augment_args(cmd: Command) -> Command {
        let mut cmd = cmd
            .arg(
                Arg::new("config")
                    .long("config")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("TOML file of run settings ([method] and [plugins.NAME] tables for plugins)"),
            )
            .arg(
                Arg::new("set")
                    .long("set")
                    .value_name("KEY=VALUE")
                    .action(ArgAction::Append)
                    .help("set any setting: a run key, method.KEY or plugins.NAME.KEY"),
            );
        for k in KEYS {
            // A later spelling wins (launch scripts put their defaults first and the user's
            // flags after them).
            let mut arg = Arg::new(k.key)
                .long(k.flag)
                .help(k.help)
                .help_heading("Run settings")
                .overrides_with(k.key);
            for a in k.aliases {
                arg = arg.alias(*a);
            }
            if !k.env.is_empty() {
                arg = arg.long_help(format!("{} [env: {}]", k.help, k.env.join(", ")));
            }
            arg = match k.kind {
                Kind::Bool => arg
                    .num_args(0..=1)
                    .require_equals(true)
                    .default_missing_value("true")
                    .value_name("BOOL"),
                Kind::Int => arg.value_name("N"),
                Kind::Float => arg.value_name("X").allow_negative_numbers(true),
                Kind::Str => arg.value_name("TEXT"),
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for RunFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut out = RunFlags {
            config: m.get_one::<PathBuf>("config").cloned(),
            sets: m
                .get_many::<String>("set")
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
            values: Vec::new(),
        };
        for k in KEYS {
            if m.value_source(k.key) != Some(ValueSource::CommandLine) {
                continue;
            }
            if let Some(v) = m.get_one::<String>(k.key) {
                out.values
                    .push((k.key.to_string(), v.clone(), format!("--{}", k.flag)));
            }
        }
        Ok(out)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_given_twice_takes_the_later_value() {
        let cmd = RunFlags::augment_args(Command::new("run"));
        let m = cmd
            .try_get_matches_from([
                "run",
                "--lr",
                "1e-3",
                "--rollout-batch-size",
                "8",
                "--lr",
                "2e-3",
            ])
            .unwrap();
        let flags = RunFlags::from_arg_matches(&m).unwrap();
        let lr: Vec<&str> = flags
            .values
            .iter()
            .filter(|(k, _, _)| k == "lr")
            .map(|(_, v, _)| v.as_str())
            .collect();
        assert_eq!(lr, ["2e-3"]);
    }
}
