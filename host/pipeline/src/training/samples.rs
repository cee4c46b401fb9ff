//! Training samples from turns: hand-written or exported trajectory turns tokenised with the
//! model's chat template, and judged turns made into [`TrainingSample`]s.

use abi_stable::std_types::{ROption, RVec};
use anyhow::{bail, Context, Result};
use openclaw_buffer::messages::{content_text, from_json};
use openclaw_buffer::trajectory::TurnRecord;
use openclaw_chat::{ChatMessage, ChatTemplate, RenderOptions, Tokenizer};
use openclaw_plugin_api::{Message, NextState, Score, TrainingSample, Turn, TurnType};
use serde_json::Value;

/// What tokenising a turn needs: the model's tokenizer and chat template.
pub struct TurnTokens<'a> {
    /// The tokenizer.
    pub tokenizer: &'a Tokenizer,
    /// The chat template.
    pub template: &'a ChatTemplate,
}

fn prompt_messages(prompt: &Value) -> Result<Vec<Value>> {
    Ok(match prompt {
        Value::String(s) => vec![serde_json::json!({"role": "user", "content": s})],
        Value::Array(m) => m.clone(),
        _ => bail!("field `prompt` must be messages or a string"),
    })
}

fn response_message(response: &Value) -> Value {
    match response {
        Value::String(s) => serde_json::json!({"role": "assistant", "content": s}),
        other => {
            let mut o = other.clone();
            if o.get("role").is_none() {
                o["role"] = Value::from("assistant");
            }
            o
        }
    }
}

fn next_state_of(v: &Value) -> Result<Option<NextState>> {
    Ok(match v {
        Value::Null => None,
        Value::String(s) => Some(NextState {
            role: "user".into(),
            content: s.as_str().into(),
            messages: vec![Message::new("user", s)].into(),
        }),
        Value::Object(o) => {
            let role = o.get("role").and_then(Value::as_str).unwrap_or("user");
            let content = content_text(o.get("content").unwrap_or(&Value::Null))
                .map_err(|e| anyhow::anyhow!("field `next_state.content`: {e}"))?;
            let messages = match o.get("messages").and_then(Value::as_array) {
                Some(ms) => ms
                    .iter()
                    .map(|m| from_json(m, role))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| anyhow::anyhow!("field `next_state.messages`: {e}"))?,
                None => vec![Message::new(role, &content)],
            };
            Some(NextState {
                role: role.into(),
                content: content.into(),
                messages: messages.into(),
            })
        }
        _ => bail!("field `next_state` must be {{role, content}}, a string or null"),
    })
}

/// A trajectory turn as a [`Turn`] with token ids: the recorded ids when the record has them
/// (exported turns), else the prompt rendered with the chat template (generation prompt
/// included) and the response as the template writes an assistant reply, ending with
/// `<|im_end|>`. Hand-written turns have no behaviour logprobs: the trainer computes them
/// with the current weights before the step. Errors name the field.
pub fn turn_from_record(
    session_id: &str,
    index: u32,
    rec: &TurnRecord,
    tok: &TurnTokens<'_>,
) -> Result<Turn> {
    let prompt = prompt_messages(&rec.prompt)?;
    let response = response_message(&rec.response);
    let prompt_msgs = prompt
        .iter()
        .enumerate()
        .map(|(i, m)| from_json(m, "user").map_err(|e| anyhow::anyhow!("field `prompt[{i}]`: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let response_msg =
        from_json(&response, "assistant").map_err(|e| anyhow::anyhow!("field `response`: {e}"))?;
    let (prompt_ids, response_ids, logprobs) = match (&rec.prompt_ids, &rec.response_ids) {
        (Some(p), Some(r)) => (
            p.clone(),
            r.clone(),
            rec.response_logprobs.clone().unwrap_or_default(),
        ),
        _ => {
            let chat: Vec<ChatMessage> = prompt
                .iter()
                .map(|m| serde_json::from_value(m.clone()))
                .collect::<Result<_, _>>()
                .context("field `prompt`: a message does not fit the chat format")?;
            let text = tok.template.render(
                &chat,
                rec.tools.as_ref(),
                &RenderOptions {
                    add_generation_prompt: true,
                    ..Default::default()
                },
            )?;
            let p = tok.tokenizer.encode(&text, false)?;
            let reply: ChatMessage = serde_json::from_value(response.clone())
                .context("field `response`: not an assistant message")?;
            let mut r = tok
                .tokenizer
                .encode(&openclaw_trainer::sft::assistant_text(&reply), false)?;
            let eot = tok
                .tokenizer
                .token_to_id(openclaw_trainer::sft::END_OF_TURN)
                .context("the tokenizer has no <|im_end|> token")?;
            r.push(eot);
            (p, r, Vec::new())
        }
    };
    if response_ids.is_empty() {
        bail!("field `response`: the response has no tokens");
    }
    let next_state = match &rec.next_state {
        Some(v) => next_state_of(v)?,
        None => None,
    };
    let main = rec.turn_type == "main";
    Ok(Turn {
        session_id: session_id.into(),
        turn_index: rec.turn_index.unwrap_or(index),
        turn_type: if main { TurnType::Main } else { TurnType::Side },
        prompt_messages: prompt_msgs.into(),
        tools_json: rec
            .tools
            .as_ref()
            .map(|t| t.to_string())
            .unwrap_or_default()
            .into(),
        response: response_msg,
        prompt_ids: prompt_ids.into(),
        response_ids: response_ids.into(),
        response_logprobs: logprobs.into(),
        weight_version: rec.weight_version.unwrap_or(0),
        next_state: next_state.into(),
        // A turn a LoRA adapter sampled has that adapter's logprobs, not the policy's: `train`
        // trains one policy, so such a turn (a user's, exported) is kept but not trained.
        trainable: main && rec.trainable && rec.adapter.is_none(),
    })
}

/// The training sample of a judged turn. `group_id` groups samples for group-relative
/// advantages (one group per session turn in live use: a user sees one answer per turn).
/// Behaviour logprobs may be empty (hand-written data); the trainer fills them.
pub fn sample_from(turn: &Turn, score: &Score, group_id: u64) -> TrainingSample {
    let n = turn.response_ids.len();
    let meta = serde_json::json!({
        "votes": score.votes.as_slice(),
        "invalid_votes": score.invalid_votes,
        "hint": score.hint.as_ref().map(|h| h.as_str()).into_option(),
        "judge": serde_json::from_str::<Value>(&score.metadata_json).unwrap_or(Value::Null),
    });
    TrainingSample {
        session_id: turn.session_id.clone(),
        turn_index: turn.turn_index,
        group_id,
        prompt_ids: turn.prompt_ids.clone(),
        response_ids: turn.response_ids.clone(),
        rollout_logprobs: turn.response_logprobs.clone(),
        loss_mask: RVec::from(vec![1.0f32; n]),
        weight_version: turn.weight_version,
        reward: score.value,
        advantages: score.advantages.clone(),
        teacher_logprobs: score.teacher_logprobs.clone(),
        teacher_topk: score.teacher_topk.clone(),
        metadata_json: meta.to_string().into(),
    }
}

/// A score given by hand (a trajectory's `reward` field): trainable unless it is 0.
pub fn given_score(reward: f32) -> Score {
    Score {
        value: reward,
        trainable: reward != 0.0,
        judge_text: "reward given in the data".into(),
        teacher_logprobs: ROption::RNone,
        ..Default::default()
    }
}
