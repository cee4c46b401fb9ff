//! The contract harness: loads a plugin and checks each kind it provides on generated inputs.
//! `openclaw-host plugins test` runs it; plugin authors run it before they ship.
//!
//! Kinds that call back into the host (reward, rollout, generate, env) are driven with a small
//! deterministic stand-in policy and judge, because the contract under test is the plugin's
//! handling of the host's answers, not the quality of a model.

use super::instance::{
    EnvHandle, GenerateHandle, LossHandle, RewardHandle, RolloutHandle, TracingLog,
};
use super::load::LoadedPlugin;
use abi_stable::std_types::{ROption, RString};
use openclaw_plugin_api::host::{Generation, JudgeService, PolicyService, TokenScores};
use openclaw_plugin_api::math::check_gradient;
use openclaw_plugin_api::testing::{random_batch, random_topk_batch};
use openclaw_plugin_api::{
    Action, GenerateRequest, HostServices, JudgeRequest, JudgeSettings, LossBatch, LossOutput,
    Message, NextState, PluginKind, RolloutRequest, SamplingParams, ScoreRequest, ScoreTokens,
    TopKEntries, TrainingSample, Turn, TurnType,
};
use std::sync::Arc;

/// The outcome of one check.
#[derive(Clone, Debug)]
pub struct Check {
    /// The kind checked.
    pub kind: PluginKind,
    /// What was checked.
    pub what: String,
    /// Whether it passed.
    pub passed: bool,
    /// Numbers or the failure's reason.
    pub detail: String,
}

/// Every check of every kind the plugin provides, configured with `config` (the plugin's
/// default config when `None`).
pub fn run(plugin: &LoadedPlugin, config: Option<&str>) -> Vec<Check> {
    let config = config
        .unwrap_or(plugin.manifest.default_config.as_str())
        .to_string();
    let mut checks = Vec::new();
    for kind in plugin.kinds.clone() {
        let mut c = Checks {
            kind,
            out: &mut checks,
        };
        match kind {
            PluginKind::Loss => check_loss(plugin, &config, &mut c),
            PluginKind::Reward => check_reward(plugin, &config, &mut c),
            PluginKind::Rollout => check_rollout(plugin, &config, &mut c),
            PluginKind::Generate => check_generate(plugin, &config, &mut c),
            PluginKind::Env => check_env(plugin, &config, &mut c),
        }
    }
    checks
}

struct Checks<'a> {
    kind: PluginKind,
    out: &'a mut Vec<Check>,
}

impl Checks<'_> {
    fn record(&mut self, what: &str, result: Result<String, String>) -> bool {
        let passed = result.is_ok();
        self.out.push(Check {
            kind: self.kind,
            what: what.to_string(),
            passed,
            detail: result.unwrap_or_else(|e| e),
        });
        passed
    }
}

fn host(plugin: &LoadedPlugin) -> HostServices {
    HostServices::builder()
        .log(TracingLog::new(plugin.name()))
        .policy(Arc::new(StandInPolicy))
        .teacher(Arc::new(StandInPolicy))
        .judge(Arc::new(StandInJudge))
        .build()
}

fn is_panic(e: &anyhow::Error) -> bool {
    format!("{e:#}").contains("panicked")
}

// ---------------------------------------------------------------------------------------------
// Loss

fn check_loss(plugin: &LoadedPlugin, config: &str, c: &mut Checks) {
    let loss = match LossHandle::new(plugin, config, host(plugin)) {
        Ok(l) => {
            c.record("constructs with its default config", Ok(String::new()));
            l
        }
        Err(e) => {
            c.record("constructs with its default config", Err(format!("{e:#}")));
            return;
        }
    };

    let mut bad = random_batch(99);
    bad.old_logp.push(-1.0);
    // The error is expected here: keep it out of the log.
    let rejected =
        tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            loss.compute(&bad)
        });
    c.record(
        "rejects a malformed batch with an error",
        match rejected {
            Ok(_) => Err("accepted a batch whose old_logp has one value too many".into()),
            Err(e) if is_panic(&e) => Err(format!("panicked instead of returning an error: {e:#}")),
            Err(e) => Ok(format!("{e:#}")),
        },
    );

    let empty = LossBatch {
        sample_offsets: vec![0].into(),
        step_samples: 1,
        ..Default::default()
    };
    c.record(
        "handles a batch with no samples",
        match loss.compute(&empty) {
            Ok(out) if out.loss.is_finite() => Ok(format!("loss {}", out.loss)),
            Ok(out) => Err(format!("loss is {}", out.loss)),
            Err(e) if is_panic(&e) => Err(format!("panicked: {e:#}")),
            Err(e) => Ok(format!("refused: {e:#}")),
        },
    );

    // Every optional input present, so any method finds what it needs.
    let batches: Vec<LossBatch> = (0..4).map(random_topk_batch).collect();
    let mut outputs = Vec::new();
    let computed = batches.iter().try_fold((), |_, b| {
        outputs.push(loss.compute(b).map_err(|e| format!("{e:#}"))?);
        Ok::<_, String>(())
    });
    if !c.record(
        "computes on random batches (empty samples, masked tokens, teacher, reference, top-k)",
        computed.map(|_| format!("{} batches", batches.len())),
    ) {
        return;
    }

    c.record("returns one gradient per token and per top-k entry", {
        batches
            .iter()
            .zip(&outputs)
            .try_for_each(|(b, o)| shapes_ok(b, o))
            .map(|_| String::new())
    });
    c.record("returns finite loss, gradients and metrics", {
        outputs
            .iter()
            .try_for_each(finite_ok)
            .map(|_| format!("metrics: {}", metric_names(&outputs[0])))
    });
    c.record("gives masked tokens no gradient", {
        batches
            .iter()
            .zip(&outputs)
            .try_for_each(|(b, o)| masked_ok(b, o))
            .map(|_| String::new())
    });
    c.record("is deterministic", {
        batches
            .iter()
            .zip(&outputs)
            .try_for_each(|(b, o)| match loss.compute(b) {
                Ok(again) if again == *o => Ok(()),
                Ok(_) => Err("two calls on the same batch returned different outputs".to_string()),
                Err(e) => Err(format!("{e:#}")),
            })
            .map(|_| String::new())
    });
    c.record("gradient matches finite differences", {
        let f = |b: &LossBatch| loss.compute(b).map_err(|e| format!("{e:#}"));
        let mut detail = Vec::new();
        let mut result = Ok(());
        for b in &batches {
            match check_gradient(&f, b, 1e-3) {
                Ok(g) => {
                    detail.push(format!(
                        "{} inputs, max rel err {:.1e}, {} kinks skipped",
                        g.checked, g.max_rel_error, g.skipped_kinks
                    ));
                    if !g.passes(1e-3) {
                        result = Err(format!(
                            "relative error {:.3e} at {} (tolerance 1e-3)",
                            g.max_rel_error, g.worst
                        ));
                        break;
                    }
                    if g.checked < g.skipped_kinks {
                        result = Err(format!(
                            "only {} inputs were smooth enough to check ({} kinks)",
                            g.checked, g.skipped_kinks
                        ));
                        break;
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        result.map(|_| detail.first().cloned().unwrap_or_default())
    });
}

fn shapes_ok(b: &LossBatch, o: &LossOutput) -> Result<(), String> {
    if o.grad_logp.len() != b.num_tokens() {
        return Err(format!(
            "{} gradients for {} tokens",
            o.grad_logp.len(),
            b.num_tokens()
        ));
    }
    if let ROption::RSome(t) = &b.topk {
        let want = t.student_logp.len();
        if !o.grad_topk.is_empty() && o.grad_topk.len() != want {
            return Err(format!(
                "{} top-k gradients for {want} entries",
                o.grad_topk.len()
            ));
        }
    }
    Ok(())
}

fn finite_ok(o: &LossOutput) -> Result<(), String> {
    if !o.loss.is_finite() {
        return Err(format!("loss is {}", o.loss));
    }
    if let Some(i) = o.grad_logp.iter().position(|g| !g.is_finite()) {
        return Err(format!("grad_logp[{i}] is {}", o.grad_logp[i]));
    }
    if let Some(i) = o.grad_topk.iter().position(|g| !g.is_finite()) {
        return Err(format!("grad_topk[{i}] is {}", o.grad_topk[i]));
    }
    if let Some(m) = o.metrics.iter().find(|m| !m.value.is_finite()) {
        return Err(format!("metric {} is {}", m.name, m.value));
    }
    let mut names: Vec<&str> = o.metrics.iter().map(|m| m.name.as_str()).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("metric {} appears twice", w[0]));
    }
    if names.iter().any(|n| n.is_empty()) {
        return Err("a metric has an empty name".into());
    }
    Ok(())
}

fn masked_ok(b: &LossBatch, o: &LossOutput) -> Result<(), String> {
    let k = match &b.topk {
        ROption::RSome(t) => t.k as usize,
        ROption::RNone => 0,
    };
    for t in 0..b.num_tokens() {
        if b.loss_mask[t] != 0.0 {
            continue;
        }
        if o.grad_logp[t] != 0.0 {
            return Err(format!("masked token {t} has gradient {}", o.grad_logp[t]));
        }
        if !o.grad_topk.is_empty() {
            if let Some(g) = o.grad_topk[t * k..(t + 1) * k].iter().find(|g| **g != 0.0) {
                return Err(format!("masked token {t} has top-k gradient {g}"));
            }
        }
    }
    Ok(())
}

fn metric_names(o: &LossOutput) -> String {
    o.metrics
        .iter()
        .map(|m| m.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// Reward

fn sample_turn(next: Option<&str>) -> Turn {
    Turn {
        session_id: "contract-check".into(),
        turn_index: 0,
        turn_type: TurnType::Main,
        prompt_messages: vec![
            Message::new("system", "You are a helpful assistant."),
            Message::new("user", "What is 2 + 3?"),
        ]
        .into(),
        tools_json: RString::new(),
        response: Message::new("assistant", "2 + 3 = 5."),
        prompt_ids: b"What is 2 + 3?".iter().map(|&b| b as u32).collect(),
        response_ids: b"2 + 3 = 5.".iter().map(|&b| b as u32).collect(),
        response_logprobs: vec![-0.5; 10].into(),
        weight_version: 0,
        next_state: next
            .map(|t| NextState {
                role: "user".into(),
                content: t.into(),
                messages: vec![Message::new("user", t)].into(),
            })
            .into(),
        trainable: true,
    }
}

fn check_reward(plugin: &LoadedPlugin, config: &str, c: &mut Checks) {
    let reward = match RewardHandle::new(plugin, config, host(plugin)) {
        Ok(r) => {
            c.record("constructs with its default config", Ok(String::new()));
            r
        }
        Err(e) => {
            c.record("constructs with its default config", Err(format!("{e:#}")));
            return;
        }
    };
    for (what, next) in [
        (
            "scores a turn with a next state",
            Some("Thanks, that is right!"),
        ),
        ("scores a turn without a next state", None),
    ] {
        let req = ScoreRequest {
            turn: sample_turn(next),
            response_text: "2 + 3 = 5.<|im_end|>".into(),
            session_closed: next.is_none(),
            judge: JudgeSettings::default(),
        };
        c.record(
            what,
            match reward.score(&req) {
                Ok(s) if s.value.is_finite() && s.votes.iter().all(|v| v.is_finite()) => {
                    Ok(format!(
                        "score {} from {} votes ({} invalid), trainable {}",
                        s.value,
                        s.votes.len(),
                        s.invalid_votes,
                        s.trainable
                    ))
                }
                Ok(s) => Err(format!(
                    "non-finite score {} or votes {:?}",
                    s.value, s.votes
                )),
                Err(e) if is_panic(&e) => Err(format!("panicked: {e:#}")),
                Err(e) if next.is_none() => Ok(format!("refused: {e:#}")),
                Err(e) => Err(format!("{e:#}")),
            },
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Rollout, generate, env

fn samples_ok(samples: &[TrainingSample]) -> Result<String, String> {
    for (i, s) in samples.iter().enumerate() {
        let n = s.response_ids.len();
        if s.rollout_logprobs.len() != n || s.loss_mask.len() != n {
            return Err(format!(
                "sample {i}: {n} response tokens but {} logprobs and {} mask values",
                s.rollout_logprobs.len(),
                s.loss_mask.len()
            ));
        }
        if !s.reward.is_finite() {
            return Err(format!("sample {i}: reward is {}", s.reward));
        }
    }
    Ok(format!("{} samples", samples.len()))
}

fn check_rollout(plugin: &LoadedPlugin, config: &str, c: &mut Checks) {
    let r = match RolloutHandle::new(plugin, config, host(plugin)) {
        Ok(r) => r,
        Err(e) => {
            c.record("constructs with its default config", Err(format!("{e:#}")));
            return;
        }
    };
    c.record("constructs with its default config", Ok(String::new()));
    let req = RolloutRequest {
        rollout_id: 0,
        batch_size: 2,
        samples_per_prompt: 1,
        evaluation: false,
    };
    c.record(
        "produces a batch of consistent samples",
        r.rollout(&req)
            .map_err(|e| format!("{e:#}"))
            .and_then(|o| samples_ok(&o.samples)),
    );
}

fn check_generate(plugin: &LoadedPlugin, config: &str, c: &mut Checks) {
    let g = match GenerateHandle::new(plugin, config, host(plugin)) {
        Ok(g) => g,
        Err(e) => {
            c.record("constructs with its default config", Err(format!("{e:#}")));
            return;
        }
    };
    c.record("constructs with its default config", Ok(String::new()));
    let req = GenerateRequest {
        messages: vec![Message::new("user", "Say hello.")].into(),
        tools_json: RString::new(),
        sampling: SamplingParams::default(),
        evaluation: false,
        metadata_json: "{}".into(),
    };
    c.record(
        "generates consistent samples for a prompt",
        g.generate(&req)
            .map_err(|e| format!("{e:#}"))
            .and_then(|s| samples_ok(&s)),
    );
}

fn check_env(plugin: &LoadedPlugin, config: &str, c: &mut Checks) {
    let env = match EnvHandle::new(plugin, config, host(plugin)) {
        Ok(e) => e,
        Err(e) => {
            c.record("constructs with its default config", Err(format!("{e:#}")));
            return;
        }
    };
    c.record("constructs with its default config", Ok(String::new()));
    let tasks = match env.tasks("train") {
        Ok(t) if !t.is_empty() => {
            c.record("lists its train tasks", Ok(format!("{} tasks", t.len())));
            t
        }
        Ok(_) => {
            c.record(
                "lists its train tasks",
                Err("the train split is empty".into()),
            );
            return;
        }
        Err(e) => {
            c.record("lists its train tasks", Err(format!("{e:#}")));
            return;
        }
    };
    let episode = (|| -> Result<String, String> {
        let (id, _obs) = env
            .reset(&tasks[0], 0)
            .map_err(|e| format!("reset: {e:#}"))?;
        let action = Action {
            message: Message::new("assistant", "I am done."),
        };
        let mut steps = 0;
        loop {
            let out = env
                .step(id, &action)
                .map_err(|e| format!("step {steps}: {e:#}"))?;
            steps += 1;
            if !out.reward.is_finite() {
                return Err(format!("step {steps}: reward is {}", out.reward));
            }
            if out.done {
                break;
            }
            if steps >= 200 {
                return Err("the episode did not end within 200 steps".into());
            }
        }
        let scored = match env.evaluate(id).map_err(|e| format!("evaluate: {e:#}"))? {
            Some(e) if !e.reward.is_finite() => {
                return Err(format!("evaluate: reward is {}", e.reward))
            }
            Some(e) => format!(", evaluated {}", e.reward),
            None => String::new(),
        };
        env.close(id).map_err(|e| format!("close: {e:#}"))?;
        Ok(format!("episode ended after {steps} steps{scored}"))
    })();
    c.record("runs an episode to its end", episode);
}

// ---------------------------------------------------------------------------------------------
// Stand-ins for the host's models

/// A deterministic stand-in policy: bytes as tokens, a fixed reply.
struct StandInPolicy;

impl StandInPolicy {
    fn reply(prompt_ids: &[u32]) -> Generation {
        let text = "OK, done.";
        let ids: Vec<u32> = text.bytes().map(u32::from).collect();
        Generation {
            prompt_ids: prompt_ids.to_vec().into(),
            logprobs: vec![-0.25; ids.len()].into(),
            response_ids: ids.into(),
            message: Message::new("assistant", text),
            finish_reason: "stop".into(),
            weight_version: 0,
        }
    }
}

impl PolicyService for StandInPolicy {
    fn generate(&self, prompt_ids: &[u32], _: &SamplingParams) -> Result<Generation, String> {
        Ok(Self::reply(prompt_ids))
    }
    fn chat(
        &self,
        messages: &[Message],
        tools: &str,
        p: &SamplingParams,
    ) -> Result<Generation, String> {
        let prompt = self.render_chat(messages, tools, true)?;
        let ids = self.tokenize(&prompt)?;
        self.generate(&ids, p)
    }
    fn score(&self, r: &ScoreTokens) -> Result<TokenScores, String> {
        let n = r.response_ids.len();
        let k = r.top_k as usize;
        Ok(TokenScores {
            logprobs: vec![-1.0; n].into(),
            topk: if k > 0 {
                ROption::RSome(TopKEntries {
                    k: r.top_k,
                    token_ids: (0..n * k).map(|i| (i % k) as u32).collect(),
                    logprobs: vec![-(k as f32).ln() - 0.1; n * k].into(),
                })
            } else {
                ROption::RNone
            },
        })
    }
    fn render_chat(
        &self,
        messages: &[Message],
        _: &str,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let mut s: String = messages
            .iter()
            .map(|m| format!("{}: {}\n", m.role, m.content))
            .collect();
        if add_generation_prompt {
            s.push_str("assistant: ");
        }
        Ok(s)
    }
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
        Ok(text.bytes().map(u32::from).collect())
    }
    fn weight_version(&self) -> u64 {
        0
    }
}

/// A deterministic stand-in judge: every vote is positive with a hint.
struct StandInJudge;

impl JudgeService for StandInJudge {
    fn complete(&self, r: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
        Ok((0..r.n.max(1))
            .map(|_| {
                Ok("The next state shows the user is satisfied. \\boxed{1}\n[HINT_START]Keep the answer short and plain.[HINT_END]".to_string())
            })
            .collect())
    }
    fn classify(&self, _: &str) -> Result<Vec<f32>, String> {
        Ok(vec![0.3, 0.7])
    }
}
