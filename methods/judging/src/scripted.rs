//! A judge and a policy that answer from a script, for testing reward plugins without a model
//! (feature `testing`).

use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::host::{
    Generation, JudgeRequest, JudgeService, PolicyService, TokenScores,
};
use openclaw_plugin_api::{Message, SamplingParams, ScoreTokens, TopKEntries};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

type Answer = dyn Fn(&JudgeRequest) -> Result<Vec<Result<String, String>>, String> + Send + Sync;

/// A judge that answers each request with a function of it and records every request.
pub struct ScriptedJudge {
    answer: Box<Answer>,
    /// Every request, in the order they arrived.
    pub requests: Mutex<Vec<JudgeRequest>>,
    in_flight: Mutex<usize>,
    changed: Condvar,
    rendezvous: Option<Duration>,
}

impl ScriptedJudge {
    /// A judge whose answer to a request is `answer(request)`.
    pub fn new(
        answer: impl Fn(&JudgeRequest) -> Result<Vec<Result<String, String>>, String>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        ScriptedJudge {
            answer: Box::new(answer),
            requests: Mutex::new(Vec::new()),
            in_flight: Mutex::new(0),
            changed: Condvar::new(),
            rendezvous: None,
        }
    }

    /// A judge that answers every request with `texts`, repeated or cut to `n` entries.
    pub fn always(texts: &[&str]) -> Self {
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        Self::new(move |r| {
            Ok((0..r.n as usize)
                .map(|i| Ok(texts[i % texts.len()].clone()))
                .collect())
        })
    }

    /// Makes each call wait until a second call is in flight, failing after `timeout`: a
    /// test of concurrency fails, rather than hangs, when calls come one after another.
    pub fn with_rendezvous(mut self, timeout: Duration) -> Self {
        self.rendezvous = Some(timeout);
        self
    }

    /// The number of requests so far.
    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    /// The text of every message of request `i`, joined.
    pub fn prompt(&self, i: usize) -> String {
        self.requests.lock().unwrap()[i]
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn meet(&self, timeout: Duration) -> Result<(), String> {
        let mut n = self.in_flight.lock().unwrap();
        *n += 1;
        self.changed.notify_all();
        let (n, wait) = self
            .changed
            .wait_timeout_while(n, timeout, |n| *n < 2)
            .unwrap();
        drop(n);
        if wait.timed_out() {
            Err("no second judge call arrived while this one was in flight".into())
        } else {
            Ok(())
        }
    }
}

impl JudgeService for ScriptedJudge {
    fn complete(&self, request: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
        self.requests.lock().unwrap().push(request.clone());
        if let Some(timeout) = self.rendezvous {
            self.meet(timeout)?;
        }
        (self.answer)(request)
    }
    fn classify(&self, _: &str) -> Result<Vec<f32>, String> {
        Err("the scripted judge has no classifier".into())
    }
}

/// A policy whose tokens are bytes and whose chat template writes `role: content` lines.
/// Its score of response token `i` is `-(1 + i) / 1000 - prompt_len / 1e6`, so a test can
/// read back which prompt it was given; every score request is recorded.
#[derive(Default)]
pub struct ScriptedPolicy {
    /// Every score request, in order.
    pub scored: Mutex<Vec<ScoreTokens>>,
    /// Every rendered chat text, in order.
    pub rendered: Mutex<Vec<String>>,
    /// Return this many log-probabilities fewer than asked (to test the checks).
    pub short_by: usize,
}

impl ScriptedPolicy {
    /// The log-probability it gives response token `i` under a prompt of `prompt_len`
    /// tokens.
    pub fn logprob(i: usize, prompt_len: usize) -> f32 {
        -((1 + i) as f32) / 1000.0 - prompt_len as f32 / 1e6
    }
}

impl PolicyService for ScriptedPolicy {
    fn generate(&self, _: &[u32], _: &SamplingParams) -> Result<Generation, String> {
        Err("the scripted policy does not generate".into())
    }
    fn chat(&self, _: &[Message], _: &str, _: &SamplingParams) -> Result<Generation, String> {
        Err("the scripted policy does not generate".into())
    }
    fn score(&self, r: &ScoreTokens) -> Result<TokenScores, String> {
        self.scored.lock().unwrap().push(r.clone());
        let n = r.response_ids.len().saturating_sub(self.short_by);
        let k = r.top_k as usize;
        Ok(TokenScores {
            logprobs: (0..n)
                .map(|i| Self::logprob(i, r.prompt_ids.len()))
                .collect(),
            topk: if k == 0 {
                ROption::RNone
            } else {
                ROption::RSome(TopKEntries {
                    k: r.top_k,
                    token_ids: (0..n * k).map(|j| j as u32).collect(),
                    logprobs: vec![-(k as f32).ln() - 0.5; n * k].into(),
                })
            },
        })
    }
    fn render_chat(
        &self,
        messages: &[Message],
        tools_json: &str,
        add_generation_prompt: bool,
    ) -> Result<String, String> {
        let mut text = String::new();
        if !tools_json.is_empty() {
            text.push_str(&format!("tools: {tools_json}\n"));
        }
        for m in messages {
            text.push_str(&format!("{}: {}\n", m.role, m.content));
        }
        if add_generation_prompt {
            text.push_str("assistant: ");
        }
        self.rendered.lock().unwrap().push(text.clone());
        Ok(text)
    }
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
        Ok(text.bytes().map(u32::from).collect())
    }
    fn weight_version(&self) -> u64 {
        0
    }
}
