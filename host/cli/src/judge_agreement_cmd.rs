//! `openclaw-host judge-agreement`: re-judges a buffer's recorded turns with the configured
//! judge (a judge model or endpoint) and with the rule-based judge, through the method's
//! reward plugin, and reports how often their verdicts agree.

use super::flags::RunFlags;
use anyhow::{bail, Context, Result};
use burn::prelude::Backend;
use openclaw_buffer::Log;
use openclaw_config::backend::{OnBackend, Placement};
use openclaw_engine::Model;
use openclaw_eval::judge_agreement::{compare, spread, turns_with_next_state, CLASSES};
use openclaw_judge as judge;
use openclaw_plugin_api::{HostServices, PluginKind};
use openclaw_plugins::instance::TracingLog;
use openclaw_plugins::RunPlugins;
use std::path::Path;
use std::sync::Arc;

/// The flags of `judge-agreement` beyond the run settings.
#[derive(clap::Args, Debug, Clone)]
pub struct AgreementFlags {
    /// Turns to judge, spread evenly over the buffer (0: all).
    #[arg(long, default_value_t = 60)]
    pub limit: usize,
    /// Disagreements quoted in the report.
    #[arg(long, default_value_t = 5)]
    pub examples: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `judge-agreement`.
pub fn run(flags: &RunFlags, extra: &AgreementFlags) -> Result<i32> {
    let plugins = RunPlugins::load(|| flags.inputs())?;
    let cfg = plugins.resolved.config.clone();
    if cfg.judge_model_path.is_empty()
        && cfg.judge_endpoint.is_empty()
        && cfg.prm_model_path.is_empty()
        && cfg.judge != "self"
    {
        bail!(
            "no judge to compare with the rules: give --judge-model-path or --prm-model-path (a \
             chat model directory or GGUF file), --judge-endpoint, or --judge self"
        );
    }
    openclaw_config::backend::dispatch(
        &cfg,
        AgreementOn {
            plugins: &plugins,
            extra,
        },
    )
}

/// `judge-agreement` on the backend the configuration places it on.
struct AgreementOn<'a> {
    plugins: &'a RunPlugins,
    extra: &'a AgreementFlags,
}

impl OnBackend for AgreementOn<'_> {
    type Output = i32;

    fn run<B: Backend>(self, placement: Placement<B>) -> Result<i32>
    where
        Model<B>: Send + Sync,
    {
        agreement_on::<B>(self.plugins, self.extra, &placement)
    }
}

fn agreement_on<B: Backend>(
    plugins: &RunPlugins,
    extra: &AgreementFlags,
    placement: &Placement<B>,
) -> Result<i32>
where
    Model<B>: Send + Sync,
{
    let cfg = plugins.resolved.config.clone();
    let dir = Path::new(&cfg.rl_buffer_dir);
    let replay =
        Log::read_all(dir).with_context(|| format!("cannot read the buffer {}", dir.display()))?;
    for w in &replay.warnings {
        eprintln!("warning: {w}");
    }
    let all = turns_with_next_state(&replay.records);
    if all.is_empty() {
        bail!(
            "{} holds no main turn with a next state to judge",
            dir.display()
        );
    }
    let turns = spread(&all, extra.limit);
    let name = plugins
        .plugin_for(PluginKind::Reward)
        .unwrap_or("reward")
        .to_string();
    // A method that scores with the policy (distillation's teacher) needs the model.
    let policy = (!cfg.model_path.is_empty())
        .then(|| openclaw_policy::policy_engine::<B>(&cfg, &placement.serve))
        .transpose()?;
    let host = |b: openclaw_plugin_api::host::HostServicesBuilder| {
        let b = b.log(TracingLog::new(&name));
        match &policy {
            Some(p) => b.policy(p.clone()).build(),
            None => b.build(),
        }
    };
    let reference = plugins.reward(host(
        HostServices::builder().judge(Arc::new(judge::rule::RuleJudge)),
    ))?;
    let choice = judge::JudgeChoice::resolve(&cfg, true, &judge::is_classifier)?;
    let judges = judge::Judges::load::<B>(&choice, &cfg, &placement.judge, &mut || {
        let p: Arc<dyn openclaw_plugin_api::host::PolicyService> = policy
            .clone()
            .context("--judge self needs the policy: give --model-path")?;
        Ok(p)
    })?;
    let candidate = plugins.reward(host(judges.give(HostServices::builder())))?;
    let settings = judge::settings(&cfg);
    eprintln!(
        "judging {} of the {} turns with a next state in {} with `{name}`, {} vote(s) each: the rule-based judge against the candidate; {}",
        turns.len(),
        all.len(),
        dir.display(),
        settings.votes,
        choice.describe()
    );
    let bar = openclaw_trainer::progress_bar(turns.len() as u64, "judging");
    let started = std::time::Instant::now();
    let report = compare(
        &turns,
        &reference,
        &candidate,
        &settings,
        cfg.num_judge_workers as usize,
        extra.examples,
        &|| bar.inc(1),
    )?;
    bar.finish_and_clear();
    if extra.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    let a = &report.agreement;
    println!(
        "{} turns judged in {:.0} s ({} could not be judged); candidate votes invalid: {} of {}",
        report.turns,
        started.elapsed().as_secs_f64(),
        report.errors,
        report.candidate_invalid_votes,
        report.candidate_votes
    );
    println!(
        "agreement with the rule-based judge: {:.2} [{:.2}, {:.2}] ({}/{}); Cohen's kappa {}",
        a.value,
        a.lo,
        a.hi,
        a.count,
        a.n,
        report
            .kappa
            .map_or("undefined".to_string(), |k| format!("{k:.2}"))
    );
    println!(
        "{:>14} {:>8} {:>8} {:>8}",
        "", "rule +1", "rule 0", "rule -1"
    );
    for (c, row) in report.counts.iter().enumerate() {
        println!(
            "{:>14} {:>8} {:>8} {:>8}",
            format!("judge {}", verdict(CLASSES[c])),
            row[0],
            row[1],
            row[2]
        );
    }
    for d in &report.disagreements {
        println!(
            "\n{} turn {}: rule {}, judge {}\n  next state: {}\n  judge said: {}",
            d.session_id,
            d.turn_index,
            verdict(d.reference),
            verdict(d.candidate),
            one_line(&d.next_state, 200),
            one_line(&d.candidate_text, 300)
        );
    }
    Ok(0)
}

/// A verdict as the table shows it: `+1`, `0`, `-1`.
fn verdict(v: i32) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:+}")
    }
}

fn one_line(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}
