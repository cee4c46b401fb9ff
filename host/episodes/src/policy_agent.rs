//! The policy as an episode's agent: each step renders the conversation, samples a reply and
//! keeps the exact tokens it saw and sampled (token-in, token-out: a step's sample is never
//! re-tokenized from text).
//!
//! The context policy: a turn's `max_tokens` is capped by what the context has left after the
//! prompt; when less than `min_reply_tokens` is left, the longest message after the first (a tool
//! output, usually) is cut to its head (30%) + `[OMITTED MIDDLE]` + its tail, halving it, until
//! the prompt fits, as the original cuts an overflowing episode. The conversation the episode
//! keeps is left whole; only what the policy is shown is cut, and the step records that.

use std::sync::Arc;

use anyhow::{anyhow, Result};
use openclaw_plugin_api::host::{Generation, PolicyService};
use openclaw_plugin_api::{Action, Message, SamplingParams};

use super::{Agent, ContextFull};

/// The marker left where a message's middle was cut.
pub const OMITTED: &str = "\n[OMITTED MIDDLE]\n";

/// Settings of a [`PolicyAgent`].
#[derive(Clone, Debug)]
pub struct PolicyAgentOptions {
    /// Sampling of every step (its `max_tokens` is the most a turn may take).
    pub sampling: SamplingParams,
    /// The model's context, in tokens.
    pub context: usize,
    /// Fewest tokens a reply must be able to take before messages are cut.
    pub min_reply_tokens: usize,
}

/// An agent that asks the policy; its steps' generations are kept in order.
pub struct PolicyAgent {
    policy: Arc<dyn PolicyService>,
    opts: PolicyAgentOptions,
    /// Each step's generation: the prompt tokens the policy saw, what it sampled, the logprobs
    /// and the weight version.
    pub steps: Vec<Generation>,
}

impl PolicyAgent {
    /// An agent over `policy`.
    pub fn new(policy: Arc<dyn PolicyService>, opts: PolicyAgentOptions) -> Self {
        PolicyAgent {
            policy,
            opts,
            steps: Vec::new(),
        }
    }

    fn prompt_tokens(&self, conversation: &[Message], tools: &str) -> Result<usize> {
        let text = self
            .policy
            .render_chat(conversation, tools, true)
            .map_err(|e| anyhow!("rendering the prompt: {e}"))?;
        Ok(self
            .policy
            .tokenize(&text)
            .map_err(|e| anyhow!("tokenizing the prompt: {e}"))?
            .len())
    }
}

/// `text` as its head (30%) + [`OMITTED`] + its tail, about half as long.
pub fn cut_middle(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let keep = chars.len() / 2;
    let head = keep * 3 / 10;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push_str(OMITTED);
    out.extend(&chars[chars.len() - tail..]);
    out
}

impl Agent for PolicyAgent {
    fn act(&mut self, conversation: &[Message], tools_json: &str) -> Result<Action> {
        let mut shown = conversation.to_vec();
        let mut prompt = self.prompt_tokens(&shown, tools_json)?;
        let mut cuts = 0;
        while prompt + self.opts.min_reply_tokens > self.opts.context {
            let longest = (1..shown.len())
                .max_by_key(|&i| shown[i].content.len())
                .filter(|&i| shown[i].content.chars().count() > 2 * OMITTED.len());
            let (Some(i), true) = (longest, cuts < 32) else {
                return Err(ContextFull(format!(
                    "the conversation ({prompt} tokens) leaves no room for a reply in the \
                     {}-token context",
                    self.opts.context
                ))
                .into());
            };
            shown[i].content = cut_middle(&shown[i].content).into();
            cuts += 1;
            prompt = self.prompt_tokens(&shown, tools_json)?;
        }
        let mut sampling = self.opts.sampling.clone();
        sampling.max_tokens = sampling
            .max_tokens
            .min((self.opts.context - prompt).min(u32::MAX as usize) as u32)
            .max(1);
        let g = self
            .policy
            .chat(&shown, tools_json, &sampling)
            .map_err(|e| anyhow!("the policy failed: {e}"))?;
        let message = g.message.clone();
        self.steps.push(g);
        Ok(Action { message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_keeps_the_head_and_tail_around_a_marker() {
        let text: String = (0..100)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let cut = cut_middle(&text);
        let (head, tail) = cut.split_once(OMITTED).unwrap();
        assert_eq!(head.len() + tail.len(), 50);
        assert_eq!(head.len(), 15);
        assert!(text.starts_with(head) && text.ends_with(tail));
    }
}
