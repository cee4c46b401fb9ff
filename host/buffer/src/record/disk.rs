//! The buffer's disk format, format 1: the JSON payload of each framed record (see
//! [`crate::log`]). Its types are the buffer's own, written field by field from the ABI's values
//! and read back into them, so a change to the ABI (a renamed field, a new type) cannot change
//! what is on disk unless this file changes too; `tests/format_v1.rs` holds the bytes of every
//! kind of record against `tests/format/v1.jsonl`.
//!
//! Writing borrows from the record (no copy of token arrays on the append path); reading owns.

use super::{Envelope, EpisodeEntry, Record};
use abi_stable::std_types::{ROption, RString, RVec};
use openclaw_plugin_api::host::Generation;
use openclaw_plugin_api::{
    Message, NextState, Score, Task, TopKEntries, TrainingSample, Turn, TurnType,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// Encodes a record with its place in the log (sequence number, append time in Unix
/// milliseconds): a segment's payload.
pub fn encode(seq: u64, at_ms: u64, record: &Record) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec(&DiskEnvelope {
        seq,
        at_ms,
        record: record.into(),
    })
}

/// Decodes a segment's payload.
pub fn decode(payload: &[u8]) -> serde_json::Result<Envelope> {
    let e: DiskEnvelope = serde_json::from_slice(payload)?;
    Ok(Envelope {
        seq: e.seq,
        at_ms: e.at_ms,
        record: e.record.into(),
    })
}

/// A record as format 1 writes it, as JSON (for fixtures and tools).
pub fn record_to_json(r: &Record) -> Value {
    serde_json::to_value(DiskRecord::from(r)).expect("records serialise")
}

/// A record from format 1's JSON.
pub fn record_from_json(v: Value) -> serde_json::Result<Record> {
    Ok(serde_json::from_value::<DiskRecord>(v)?.into())
}

/// An episode as format 1 writes it, as JSON (what `buffer export --episodes` shows).
pub fn episode_to_json(e: &EpisodeEntry) -> Value {
    serde_json::to_value(DiskEpisode::from(e)).expect("episodes serialise")
}

#[derive(Serialize, Deserialize)]
struct DiskEnvelope<'a> {
    seq: u64,
    at_ms: u64,
    record: DiskRecord<'a>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum DiskRecord<'a> {
    Turn {
        turn: Box<DiskTurn<'a>>,
        /// Absent unless the turn was decoded under a grammar (written since format v1 first
        /// shipped; older records read as unconstrained).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        constraint: Option<Cow<'a, str>>,
        /// Absent unless the reply was sampled with a LoRA adapter over the base.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adapter: Option<Cow<'a, str>>,
    },
    NextState {
        session_id: Cow<'a, str>,
        turn_index: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_seq: Option<u64>,
        next_state: DiskNextState<'a>,
    },
    SessionClosed {
        session_id: Cow<'a, str>,
        reason: Cow<'a, str>,
    },
    Judgement {
        session_id: Cow<'a, str>,
        turn_index: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_seq: Option<u64>,
        score: Box<DiskScore<'a>>,
    },
    Sample {
        sample: Box<DiskSample<'a>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_seq: Option<u64>,
    },
    Feedback {
        session_id: Cow<'a, str>,
        turn_index: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        turn_seq: Option<u64>,
        reward: f32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<Cow<'a, str>>,
    },
    Episode {
        episode: Box<DiskEpisode<'a>>,
    },
}

#[derive(Serialize, Deserialize)]
struct DiskMessage<'a> {
    role: Cow<'a, str>,
    content: Cow<'a, str>,
    #[serde(default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls_json: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_call_id: Option<Cow<'a, str>>,
    #[serde(default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DiskTurnType {
    Main,
    Side,
}

#[derive(Serialize, Deserialize)]
struct DiskNextState<'a> {
    role: Cow<'a, str>,
    content: Cow<'a, str>,
    #[serde(default)]
    messages: Vec<DiskMessage<'a>>,
}

#[derive(Serialize, Deserialize)]
struct DiskTurn<'a> {
    session_id: Cow<'a, str>,
    turn_index: u32,
    turn_type: DiskTurnType,
    prompt_messages: Vec<DiskMessage<'a>>,
    #[serde(default)]
    tools_json: Cow<'a, str>,
    response: DiskMessage<'a>,
    prompt_ids: Cow<'a, [u32]>,
    response_ids: Cow<'a, [u32]>,
    response_logprobs: Cow<'a, [f32]>,
    weight_version: u64,
    #[serde(default)]
    next_state: Option<DiskNextState<'a>>,
    trainable: bool,
}

#[derive(Serialize, Deserialize)]
struct DiskTopK<'a> {
    k: u32,
    token_ids: Cow<'a, [u32]>,
    logprobs: Cow<'a, [f32]>,
}

#[derive(Serialize, Deserialize)]
struct DiskScore<'a> {
    value: f32,
    trainable: bool,
    votes: Cow<'a, [f32]>,
    invalid_votes: u32,
    hint: Option<Cow<'a, str>>,
    judge_text: Cow<'a, str>,
    teacher_logprobs: Option<Cow<'a, [f32]>>,
    teacher_topk: Option<DiskTopK<'a>>,
    advantages: Option<Cow<'a, [f32]>>,
    metadata_json: Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct DiskSample<'a> {
    session_id: Cow<'a, str>,
    turn_index: u32,
    group_id: u64,
    prompt_ids: Cow<'a, [u32]>,
    response_ids: Cow<'a, [u32]>,
    rollout_logprobs: Cow<'a, [f32]>,
    loss_mask: Cow<'a, [f32]>,
    weight_version: u64,
    reward: f32,
    #[serde(default)]
    advantages: Option<Cow<'a, [f32]>>,
    #[serde(default)]
    teacher_logprobs: Option<Cow<'a, [f32]>>,
    #[serde(default)]
    teacher_topk: Option<DiskTopK<'a>>,
    #[serde(default)]
    metadata_json: Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct DiskTask<'a> {
    id: Cow<'a, str>,
    instruction: Cow<'a, str>,
    data_json: Cow<'a, str>,
}

#[derive(Serialize, Deserialize)]
struct DiskGeneration<'a> {
    prompt_ids: Cow<'a, [u32]>,
    response_ids: Cow<'a, [u32]>,
    logprobs: Cow<'a, [f32]>,
    message: DiskMessage<'a>,
    finish_reason: Cow<'a, str>,
    weight_version: u64,
}

#[derive(Serialize, Deserialize)]
struct DiskEpisode<'a> {
    episode_id: Cow<'a, str>,
    env: Cow<'a, str>,
    group: u64,
    group_size: u32,
    sample: u32,
    task: DiskTask<'a>,
    conversation: Vec<DiskMessage<'a>>,
    action_at: Cow<'a, [u32]>,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    tools_json: Cow<'a, str>,
    steps: Vec<DiskGeneration<'a>>,
    step_rewards: Cow<'a, [f32]>,
    tool_steps: u32,
    ending: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "str::is_empty")]
    failure: Cow<'a, str>,
    reward: Option<f32>,
    #[serde(default, skip_serializing_if = "<[f32]>::is_empty")]
    step_scores: Cow<'a, [f32]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    outcome: Option<f32>,
    solved: Option<bool>,
    evaluated: bool,
    details_json: Cow<'a, str>,
}

// Field by field, both ways. The borrowing side (`From<&'a Abi>`) is the append path; the owning
// side (`From<Disk>`) is replay.

fn text(s: &RString) -> Cow<'_, str> {
    Cow::Borrowed(s.as_str())
}

fn opt_text(s: &ROption<RString>) -> Option<Cow<'_, str>> {
    s.as_ref().map(text).into_option()
}

fn slice<T: Clone>(v: &RVec<T>) -> Cow<'_, [T]> {
    Cow::Borrowed(v.as_slice())
}

fn opt_slice<T: Clone>(v: &ROption<RVec<T>>) -> Option<Cow<'_, [T]>> {
    v.as_ref().map(slice).into_option()
}

fn rstring(s: Cow<'_, str>) -> RString {
    s.into_owned().into()
}

fn ropt_string(s: Option<Cow<'_, str>>) -> ROption<RString> {
    s.map(rstring).into()
}

fn rvec<T: Clone>(v: Cow<'_, [T]>) -> RVec<T> {
    v.into_owned().into()
}

fn ropt_vec<T: Clone>(v: Option<Cow<'_, [T]>>) -> ROption<RVec<T>> {
    v.map(rvec).into()
}

impl<'a> From<&'a Message> for DiskMessage<'a> {
    fn from(m: &'a Message) -> Self {
        DiskMessage {
            role: text(&m.role),
            content: text(&m.content),
            reasoning_content: opt_text(&m.reasoning_content),
            tool_calls_json: opt_text(&m.tool_calls_json),
            tool_call_id: opt_text(&m.tool_call_id),
            name: opt_text(&m.name),
        }
    }
}

impl From<DiskMessage<'_>> for Message {
    fn from(m: DiskMessage<'_>) -> Self {
        Message {
            role: rstring(m.role),
            content: rstring(m.content),
            reasoning_content: ropt_string(m.reasoning_content),
            tool_calls_json: ropt_string(m.tool_calls_json),
            tool_call_id: ropt_string(m.tool_call_id),
            name: ropt_string(m.name),
        }
    }
}

fn messages(m: &[Message]) -> Vec<DiskMessage<'_>> {
    m.iter().map(DiskMessage::from).collect()
}

fn rmessages(m: Vec<DiskMessage<'_>>) -> RVec<Message> {
    m.into_iter().map(Message::from).collect()
}

impl<'a> From<&'a NextState> for DiskNextState<'a> {
    fn from(n: &'a NextState) -> Self {
        DiskNextState {
            role: text(&n.role),
            content: text(&n.content),
            messages: messages(&n.messages),
        }
    }
}

impl From<DiskNextState<'_>> for NextState {
    fn from(n: DiskNextState<'_>) -> Self {
        NextState {
            role: rstring(n.role),
            content: rstring(n.content),
            messages: rmessages(n.messages),
        }
    }
}

impl<'a> From<&'a Turn> for DiskTurn<'a> {
    fn from(t: &'a Turn) -> Self {
        DiskTurn {
            session_id: text(&t.session_id),
            turn_index: t.turn_index,
            turn_type: match t.turn_type {
                TurnType::Main => DiskTurnType::Main,
                TurnType::Side => DiskTurnType::Side,
            },
            prompt_messages: messages(&t.prompt_messages),
            tools_json: text(&t.tools_json),
            response: (&t.response).into(),
            prompt_ids: slice(&t.prompt_ids),
            response_ids: slice(&t.response_ids),
            response_logprobs: slice(&t.response_logprobs),
            weight_version: t.weight_version,
            next_state: t.next_state.as_ref().map(DiskNextState::from).into_option(),
            trainable: t.trainable,
        }
    }
}

impl From<DiskTurn<'_>> for Turn {
    fn from(t: DiskTurn<'_>) -> Self {
        Turn {
            session_id: rstring(t.session_id),
            turn_index: t.turn_index,
            turn_type: match t.turn_type {
                DiskTurnType::Main => TurnType::Main,
                DiskTurnType::Side => TurnType::Side,
            },
            prompt_messages: rmessages(t.prompt_messages),
            tools_json: rstring(t.tools_json),
            response: t.response.into(),
            prompt_ids: rvec(t.prompt_ids),
            response_ids: rvec(t.response_ids),
            response_logprobs: rvec(t.response_logprobs),
            weight_version: t.weight_version,
            next_state: t.next_state.map(NextState::from).into(),
            trainable: t.trainable,
        }
    }
}

impl<'a> From<&'a TopKEntries> for DiskTopK<'a> {
    fn from(t: &'a TopKEntries) -> Self {
        DiskTopK {
            k: t.k,
            token_ids: slice(&t.token_ids),
            logprobs: slice(&t.logprobs),
        }
    }
}

impl From<DiskTopK<'_>> for TopKEntries {
    fn from(t: DiskTopK<'_>) -> Self {
        TopKEntries {
            k: t.k,
            token_ids: rvec(t.token_ids),
            logprobs: rvec(t.logprobs),
        }
    }
}

fn topk(t: &ROption<TopKEntries>) -> Option<DiskTopK<'_>> {
    t.as_ref().map(DiskTopK::from).into_option()
}

impl<'a> From<&'a Score> for DiskScore<'a> {
    fn from(s: &'a Score) -> Self {
        DiskScore {
            value: s.value,
            trainable: s.trainable,
            votes: slice(&s.votes),
            invalid_votes: s.invalid_votes,
            hint: opt_text(&s.hint),
            judge_text: text(&s.judge_text),
            teacher_logprobs: opt_slice(&s.teacher_logprobs),
            teacher_topk: topk(&s.teacher_topk),
            advantages: opt_slice(&s.advantages),
            metadata_json: text(&s.metadata_json),
        }
    }
}

impl From<DiskScore<'_>> for Score {
    fn from(s: DiskScore<'_>) -> Self {
        Score {
            value: s.value,
            trainable: s.trainable,
            votes: rvec(s.votes),
            invalid_votes: s.invalid_votes,
            hint: ropt_string(s.hint),
            judge_text: rstring(s.judge_text),
            teacher_logprobs: ropt_vec(s.teacher_logprobs),
            teacher_topk: s.teacher_topk.map(TopKEntries::from).into(),
            advantages: ropt_vec(s.advantages),
            metadata_json: rstring(s.metadata_json),
        }
    }
}

impl<'a> From<&'a TrainingSample> for DiskSample<'a> {
    fn from(s: &'a TrainingSample) -> Self {
        DiskSample {
            session_id: text(&s.session_id),
            turn_index: s.turn_index,
            group_id: s.group_id,
            prompt_ids: slice(&s.prompt_ids),
            response_ids: slice(&s.response_ids),
            rollout_logprobs: slice(&s.rollout_logprobs),
            loss_mask: slice(&s.loss_mask),
            weight_version: s.weight_version,
            reward: s.reward,
            advantages: opt_slice(&s.advantages),
            teacher_logprobs: opt_slice(&s.teacher_logprobs),
            teacher_topk: topk(&s.teacher_topk),
            metadata_json: text(&s.metadata_json),
        }
    }
}

impl From<DiskSample<'_>> for TrainingSample {
    fn from(s: DiskSample<'_>) -> Self {
        TrainingSample {
            session_id: rstring(s.session_id),
            turn_index: s.turn_index,
            group_id: s.group_id,
            prompt_ids: rvec(s.prompt_ids),
            response_ids: rvec(s.response_ids),
            rollout_logprobs: rvec(s.rollout_logprobs),
            loss_mask: rvec(s.loss_mask),
            weight_version: s.weight_version,
            reward: s.reward,
            advantages: ropt_vec(s.advantages),
            teacher_logprobs: ropt_vec(s.teacher_logprobs),
            teacher_topk: s.teacher_topk.map(TopKEntries::from).into(),
            metadata_json: rstring(s.metadata_json),
        }
    }
}

impl<'a> From<&'a Generation> for DiskGeneration<'a> {
    fn from(g: &'a Generation) -> Self {
        DiskGeneration {
            prompt_ids: slice(&g.prompt_ids),
            response_ids: slice(&g.response_ids),
            logprobs: slice(&g.logprobs),
            message: (&g.message).into(),
            finish_reason: text(&g.finish_reason),
            weight_version: g.weight_version,
        }
    }
}

impl From<DiskGeneration<'_>> for Generation {
    fn from(g: DiskGeneration<'_>) -> Self {
        Generation {
            prompt_ids: rvec(g.prompt_ids),
            response_ids: rvec(g.response_ids),
            logprobs: rvec(g.logprobs),
            message: g.message.into(),
            finish_reason: rstring(g.finish_reason),
            weight_version: g.weight_version,
        }
    }
}

impl<'a> From<&'a EpisodeEntry> for DiskEpisode<'a> {
    fn from(e: &'a EpisodeEntry) -> Self {
        DiskEpisode {
            episode_id: Cow::Borrowed(&e.episode_id),
            env: Cow::Borrowed(&e.env),
            group: e.group,
            group_size: e.group_size,
            sample: e.sample,
            task: DiskTask {
                id: text(&e.task.id),
                instruction: text(&e.task.instruction),
                data_json: text(&e.task.data_json),
            },
            conversation: messages(&e.conversation),
            action_at: Cow::Borrowed(&e.action_at),
            tools_json: Cow::Borrowed(&e.tools_json),
            steps: e.steps.iter().map(DiskGeneration::from).collect(),
            step_rewards: Cow::Borrowed(&e.step_rewards),
            tool_steps: e.tool_steps,
            ending: Cow::Borrowed(&e.ending),
            failure: Cow::Borrowed(&e.failure),
            reward: e.reward,
            step_scores: Cow::Borrowed(&e.step_scores),
            outcome: e.outcome,
            solved: e.solved,
            evaluated: e.evaluated,
            details_json: Cow::Borrowed(&e.details_json),
        }
    }
}

impl From<DiskEpisode<'_>> for EpisodeEntry {
    fn from(e: DiskEpisode<'_>) -> Self {
        EpisodeEntry {
            episode_id: e.episode_id.into_owned(),
            env: e.env.into_owned(),
            group: e.group,
            group_size: e.group_size,
            sample: e.sample,
            task: Task {
                id: rstring(e.task.id),
                instruction: rstring(e.task.instruction),
                data_json: rstring(e.task.data_json),
            },
            conversation: e.conversation.into_iter().map(Message::from).collect(),
            action_at: e.action_at.into_owned(),
            tools_json: e.tools_json.into_owned(),
            steps: e.steps.into_iter().map(Generation::from).collect(),
            step_rewards: e.step_rewards.into_owned(),
            tool_steps: e.tool_steps,
            ending: e.ending.into_owned(),
            failure: e.failure.into_owned(),
            reward: e.reward,
            step_scores: e.step_scores.into_owned(),
            outcome: e.outcome,
            solved: e.solved,
            evaluated: e.evaluated,
            details_json: e.details_json.into_owned(),
        }
    }
}

impl<'a> From<&'a Record> for DiskRecord<'a> {
    fn from(r: &'a Record) -> Self {
        match r {
            Record::Turn {
                turn,
                constraint,
                adapter,
            } => DiskRecord::Turn {
                adapter: adapter.as_deref().map(Cow::Borrowed),
                turn: Box::new((&**turn).into()),
                constraint: constraint.as_deref().map(Cow::Borrowed),
            },
            Record::NextState {
                session_id,
                turn_index,
                turn_seq,
                next_state,
            } => DiskRecord::NextState {
                session_id: Cow::Borrowed(session_id),
                turn_index: *turn_index,
                turn_seq: *turn_seq,
                next_state: next_state.into(),
            },
            Record::SessionClosed { session_id, reason } => DiskRecord::SessionClosed {
                session_id: Cow::Borrowed(session_id),
                reason: Cow::Borrowed(reason),
            },
            Record::Judgement {
                session_id,
                turn_index,
                turn_seq,
                score,
            } => DiskRecord::Judgement {
                session_id: Cow::Borrowed(session_id),
                turn_index: *turn_index,
                turn_seq: *turn_seq,
                score: Box::new((&**score).into()),
            },
            Record::Sample { sample, turn_seq } => DiskRecord::Sample {
                sample: Box::new((&**sample).into()),
                turn_seq: *turn_seq,
            },
            Record::Feedback {
                session_id,
                turn_index,
                turn_seq,
                reward,
                text,
            } => DiskRecord::Feedback {
                session_id: Cow::Borrowed(session_id),
                turn_index: *turn_index,
                turn_seq: *turn_seq,
                reward: *reward,
                text: text.as_deref().map(Cow::Borrowed),
            },
            Record::Episode { episode } => DiskRecord::Episode {
                episode: Box::new((&**episode).into()),
            },
        }
    }
}

impl From<DiskRecord<'_>> for Record {
    fn from(r: DiskRecord<'_>) -> Self {
        match r {
            DiskRecord::Turn {
                turn,
                constraint,
                adapter,
            } => Record::Turn {
                adapter: adapter.map(Cow::into_owned),
                turn: Box::new((*turn).into()),
                constraint: constraint.map(Cow::into_owned),
            },
            DiskRecord::NextState {
                session_id,
                turn_index,
                turn_seq,
                next_state,
            } => Record::NextState {
                session_id: session_id.into_owned(),
                turn_index,
                turn_seq,
                next_state: next_state.into(),
            },
            DiskRecord::SessionClosed { session_id, reason } => Record::SessionClosed {
                session_id: session_id.into_owned(),
                reason: reason.into_owned(),
            },
            DiskRecord::Judgement {
                session_id,
                turn_index,
                turn_seq,
                score,
            } => Record::Judgement {
                session_id: session_id.into_owned(),
                turn_index,
                turn_seq,
                score: Box::new((*score).into()),
            },
            DiskRecord::Sample { sample, turn_seq } => Record::Sample {
                sample: Box::new((*sample).into()),
                turn_seq,
            },
            DiskRecord::Feedback {
                session_id,
                turn_index,
                turn_seq,
                reward,
                text,
            } => Record::Feedback {
                session_id: session_id.into_owned(),
                turn_index,
                turn_seq,
                reward,
                text: text.map(Cow::into_owned),
            },
            DiskRecord::Episode { episode } => Record::Episode {
                episode: Box::new((*episode).into()),
            },
        }
    }
}
