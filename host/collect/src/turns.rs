//! A served turn from collection's side: when a request arrives it is given its session and
//! turn, and the previous turn's next state and any sessions it closed are recorded before
//! anything is generated ([`TurnDesk::open`]); when its answer is done, the turn with its
//! exact tokens is recorded before the client sees the end of it ([`TurnDesk::record`]).

use crate::{Assignment, Closed, FeedbackFate, Recorder, SessionHints, SessionTracker};
use openclaw_buffer::messages::to_abi;
use openclaw_chat::ChatMessage;
use openclaw_plugin_api::{Turn, TurnType};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Why a turn could not be opened or recorded.
#[derive(Debug)]
pub enum TurnError {
    /// The session table was poisoned by a panic.
    Poisoned,
    /// The buffer did not take a record (the message says why).
    Unrecorded(String),
}

/// What a finished answer leaves to record: the reply as the client sees it and the exact
/// tokens it was sampled as.
pub struct Answer<'a> {
    /// The request's messages.
    pub messages: &'a [ChatMessage],
    /// The request's tools (JSON), when it had any.
    pub tools: Option<&'a serde_json::Value>,
    /// Which of the request's choices this is (0 when it asked for one).
    pub choice: u32,
    /// Whether the request ended its session (`session_done`) and this is the last of its
    /// choices to be recorded.
    pub done: bool,
    /// The prompt's token ids.
    pub prompt_ids: &'a [u32],
    /// The reply.
    pub reply: ChatMessage,
    /// The sampled token ids.
    pub response_ids: &'a [u32],
    /// Their logprobs under the sampling distribution.
    pub response_logprobs: &'a [f32],
    /// The weight version that sampled them.
    pub weight_version: u64,
    /// The grammar the reply was decoded under (structured outputs), by kind: the logprobs
    /// are then the masked distribution's, and the turn is not trained on.
    pub constraint: Option<&'static str>,
    /// The LoRA adapter the reply was sampled with (`--lora-modules`, or the user's under
    /// `--adapters per-user`): the turn is then that adapter's, not the shared policy's, and
    /// trains only that adapter ([`AdapterTurns`]).
    pub adapter: Option<&'a str>,
    /// The id the client got (`chatcmpl-...`), by which it may give feedback.
    pub completion_id: &'a str,
}

/// Which turn a feedback is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FeedbackTarget {
    /// The turn whose answer had this id, and which of its choices (`choice_index`; required
    /// when the answer had several).
    Completion(String, Option<u32>),
    /// A session's turn, by index.
    Turn {
        /// The session.
        session_id: String,
        /// The turn's index in it.
        turn_index: u32,
    },
    /// A session's latest recorded turn.
    Latest(String),
}

/// Why a feedback was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum FeedbackError {
    /// No turn this server recorded since it started has that id or place.
    Unknown(String),
    /// The answer had several choices and the feedback did not say which (`choice_index`).
    WhichChoice(String),
    /// The turn cannot be trained on (a side turn, or one decoded under a grammar).
    NotTrainable(String),
    /// The turn already had a feedback: the first one stands.
    Given(String),
    /// A session key named a turn of another session.
    OtherSession(String),
    /// The buffer did not take the record.
    Unrecorded(String),
}

/// The most recorded turns a feedback can name (the oldest are forgotten first).
const RECENT_TURNS: usize = 100_000;

/// The turns recorded since the server started, for feedback to find them.
#[derive(Debug, Default)]
pub struct RecentTurns {
    /// (completion id, choice) → the choice's turn; with the answer's number of choices.
    by_completion: HashMap<(String, u32), ((String, u32), u32)>,
    by_turn: HashMap<(String, u32), Kept>,
    /// Each session's latest trainable turn, with the number of choices its request had.
    latest: HashMap<String, (u32, u32)>,
    order: VecDeque<((String, u32), (String, u32))>,
}

/// What feedback needs to know of a recorded turn.
#[derive(Clone, Debug)]
struct Kept {
    /// The turn record's sequence number.
    seq: u64,
    trainable: bool,
    /// Whether it had its feedback.
    given: bool,
    /// The user whose adapter answered it, if one did.
    user: Option<String>,
}

/// A turn feedback names: its session and index, and what is kept of it.
type Found = (String, u32, Kept);

/// Who gives a feedback: the server's key may name any turn; a session's key only its
/// session's, a user's key only the turns their adapter answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedbackBy<'a> {
    /// The server's key (or none asked).
    Server,
    /// A key `/rl/start_session` issued, for this session.
    Session(&'a str),
    /// A key `/admin/users` issued, for this user.
    User(&'a str),
}

/// A recorded turn, as [`RecentTurns`] learns of it.
struct Recent<'a> {
    completion: &'a str,
    choice: u32,
    choices: u32,
    key: (String, u32),
    seq: u64,
    trainable: bool,
    user: Option<&'a str>,
}

impl RecentTurns {
    fn add(&mut self, t: Recent<'_>) {
        let Recent {
            completion,
            choice,
            choices,
            key,
            seq,
            trainable,
            user,
        } = t;
        let completion = (completion.to_string(), choice);
        if self.order.len() >= RECENT_TURNS {
            if let Some((c, k)) = self.order.pop_front() {
                self.by_completion.remove(&c);
                if self.latest.get(&k.0).map(|l| l.0) == Some(k.1) {
                    self.latest.remove(&k.0);
                }
                self.by_turn.remove(&k);
            }
        }
        self.by_completion
            .insert(completion.clone(), (key.clone(), choices));
        self.by_turn.insert(
            key.clone(),
            Kept {
                seq,
                trainable,
                given: false,
                user: user.map(str::to_string),
            },
        );
        // A session's latest trainable turn, which a session key's feedback names by default.
        if trainable {
            self.latest.insert(key.0.clone(), (key.1, choices));
        }
        self.order.push_back((completion, key));
    }

    /// The turn a target names; `Err` (the number of choices) when an answer of several
    /// choices is named without one.
    fn find(&self, target: &FeedbackTarget) -> Result<Option<Found>, u32> {
        let key = match target {
            FeedbackTarget::Completion(id, choice) => {
                let Some((key, choices)) =
                    self.by_completion.get(&(id.clone(), choice.unwrap_or(0)))
                else {
                    return Ok(None);
                };
                if choice.is_none() && *choices > 1 {
                    return Err(*choices);
                }
                key.clone()
            }
            FeedbackTarget::Turn {
                session_id,
                turn_index,
            } => (session_id.clone(), *turn_index),
            FeedbackTarget::Latest(session_id) => match self.latest.get(session_id) {
                // The latest answer had several choices: which one is the client's to say.
                Some(&(_, choices)) if choices > 1 => return Err(choices),
                Some(&(i, _)) => (session_id.clone(), i),
                None => return Ok(None),
            },
        };
        Ok(self
            .by_turn
            .get(&key)
            .map(|kept| (key.0, key.1, kept.clone())))
    }

    /// Marks whether a turn has had its feedback.
    fn set_given(&mut self, session_id: &str, turn_index: u32, given: bool) {
        if let Some(t) = self.by_turn.get_mut(&(session_id.to_string(), turn_index)) {
            t.given = given;
        }
    }
}

/// Session tracking and the recorder, as the server uses them for each request.
pub struct TurnDesk {
    /// Session tracking.
    pub sessions: Arc<Mutex<SessionTracker>>,
    /// Where turns go.
    pub recorder: Recorder,
    /// Record turns for training (`--enable-rl-intercept`); sessions are tracked either way.
    pub record_turns: bool,
    /// The turns recorded since the start, for feedback to name.
    pub recent: Mutex<RecentTurns>,
    /// What becomes of a turn an adapter answered.
    pub adapter_turns: AdapterTurns,
}

/// What becomes of a turn a LoRA adapter answered: its logprobs are the adapter's, so it can
/// train that adapter but never the shared policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AdapterTurns {
    /// Recorded and never trained (`serve`, `--lora-modules`).
    #[default]
    Kept,
    /// Trained into the adapter that answered it (`run --adapters per-user`); a turn the base
    /// answered for no user is then kept and not trained, since the base under every adapter
    /// stays as it is.
    Trained,
}

impl TurnDesk {
    /// The session and turn of a request, with the previous turn's next state and the sessions
    /// it closed recorded first.
    pub fn open(
        &self,
        hints: &SessionHints,
        messages: &[ChatMessage],
    ) -> Result<Assignment, TurnError> {
        self.open_n(hints, messages, 1)
    }

    /// [`Self::open`] for a request of `choices` choices (`n`), which takes as many turns.
    pub fn open_n(
        &self,
        hints: &SessionHints,
        messages: &[ChatMessage],
        choices: u32,
    ) -> Result<Assignment, TurnError> {
        let (assignment, closed) = {
            let mut t = self.sessions.lock().map_err(|_| TurnError::Poisoned)?;
            t.on_request_n(hints, messages, choices, Instant::now())
        };
        if self.record_turns {
            for c in &closed {
                self.record_closed(c)?;
            }
            if let Some((turn, ns)) = &assignment.next_state {
                self.recorder
                    .next_state(&assignment.session_id, *turn, ns.clone())
                    .map_err(|e| TurnError::Unrecorded(format!("cannot record: {e:#}")))?;
            }
            self.recorder
                .unfollowed(&assignment.session_id, &assignment.unfollowed);
        }
        Ok(assignment)
    }

    /// Records the finished turn (durably) and tells session tracking about the reply; a
    /// session the request ended is recorded closed after its last turn.
    pub fn record(&self, assignment: &Assignment, answer: Answer) -> Result<(), TurnError> {
        let closed = match self.sessions.lock() {
            Ok(mut t) => {
                t.on_choice(
                    assignment,
                    answer.choice,
                    answer.messages,
                    &answer.reply,
                    Instant::now(),
                );
                answer
                    .done
                    .then(|| t.close(&assignment.session_id, "done"))
                    .flatten()
            }
            Err(_) => None,
        };
        if !self.record_turns {
            return closed.map_or(Ok(()), |c| self.record_closed(&c));
        }
        let prompt_messages: Vec<_> = answer.messages.iter().map(to_abi).collect();
        let turn_index = assignment.turn_index + answer.choice;
        let turn = Turn {
            session_id: assignment.session_id.as_str().into(),
            turn_index,
            turn_type: assignment.turn_type,
            prompt_messages: prompt_messages.into(),
            tools_json: answer
                .tools
                .map(|t| t.to_string())
                .unwrap_or_default()
                .into(),
            response: to_abi(&answer.reply),
            prompt_ids: answer.prompt_ids.to_vec().into(),
            response_ids: answer.response_ids.to_vec().into(),
            response_logprobs: answer.response_logprobs.to_vec().into(),
            weight_version: answer.weight_version,
            next_state: None.into(),
            // A grammar's masks are not part of the policy: its logprobs are not the policy's,
            // so the turn is kept (and its successor's next state) but not trained on.
            trainable: assignment.turn_type == TurnType::Main
                && answer.constraint.is_none()
                && match self.adapter_turns {
                    AdapterTurns::Kept => answer.adapter.is_none(),
                    AdapterTurns::Trained => answer.adapter.is_some(),
                },
        };
        let trainable = turn.trainable;
        let recorded = self
            .recorder
            .turn(
                turn,
                crate::Sampled {
                    constraint: answer.constraint,
                    adapter: answer.adapter,
                },
            )
            .map(|seq| {
                if let Ok(mut r) = self.recent.lock() {
                    r.add(Recent {
                        completion: answer.completion_id,
                        choice: answer.choice,
                        choices: assignment.choices,
                        key: (assignment.session_id.clone(), turn_index),
                        seq,
                        trainable,
                        user: answer.adapter,
                    });
                }
            })
            .map_err(|e| TurnError::Unrecorded(format!("cannot record the turn: {e:#}")));
        // The session is closed in memory either way; its end is recorded even if the turn
        // was not.
        let ended = closed.map_or(Ok(()), |c| self.record_closed(&c));
        recorded.and(ended)
    }

    /// Records a user's `reward` (in [-1, 1]) and `text` for the turn `target` names, and
    /// tells what collection made of it. `by` says whose turns the key may name. A turn takes
    /// one feedback: the first.
    pub fn feedback(
        &self,
        target: &FeedbackTarget,
        by: FeedbackBy<'_>,
        reward: f32,
        text: Option<String>,
    ) -> Result<(String, u32, FeedbackFate), FeedbackError> {
        let (session_id, turn_index, seq) = {
            let mut recent = self
                .recent
                .lock()
                .map_err(|_| FeedbackError::Unrecorded("the turn table was poisoned".into()))?;
            let found = recent.find(target).map_err(|choices| {
                FeedbackError::WhichChoice(format!(
                    "the answer had {choices} choices: say which with `choice_index` (0 to {})",
                    choices - 1
                ))
            })?;
            let Some((session_id, turn_index, kept)) = found else {
                let what = match target {
                    FeedbackTarget::Completion(id, Some(choice)) => {
                        format!("no recorded turn has the completion id `{id}` and choice {choice}")
                    }
                    FeedbackTarget::Completion(id, None) => {
                        format!("no recorded turn has the completion id `{id}`")
                    }
                    FeedbackTarget::Turn {
                        session_id,
                        turn_index,
                    } => format!("session `{session_id}` has no recorded turn {turn_index}"),
                    FeedbackTarget::Latest(session_id) => {
                        format!("session `{session_id}` has no recorded turn to train")
                    }
                };
                return Err(FeedbackError::Unknown(format!(
                    "{what} (turns recorded since this server started can be named)"
                )));
            };
            match by {
                FeedbackBy::Session(s) if s != session_id => {
                    return Err(FeedbackError::OtherSession(format!(
                        "This key is session `{s}`'s; the turn is another session's."
                    )))
                }
                FeedbackBy::User(u) if kept.user.as_deref() != Some(u) => {
                    return Err(FeedbackError::OtherSession(format!(
                        "This key is user `{u}`'s; the turn is not one their adapter answered."
                    )))
                }
                _ => {}
            }
            let (seq, trainable, given) = (kept.seq, kept.trainable, kept.given);
            if !trainable {
                return Err(FeedbackError::NotTrainable(format!(
                    "turn {turn_index} of session `{session_id}` is not trained on (a side turn, a reply decoded under a grammar, one a named adapter answered, or one no user's adapter answered while each user's adapter trains)"
                )));
            }
            if given {
                return Err(FeedbackError::Given(format!(
                    "turn {turn_index} of session `{session_id}` already had a feedback; the first one stands"
                )));
            }
            recent.set_given(&session_id, turn_index, true);
            (session_id, turn_index, seq)
        };
        let fate = self
            .recorder
            .feedback(&session_id, turn_index, seq, reward, text);
        if !matches!(fate, Ok(f) if f != FeedbackFate::Busy) {
            // Nothing was recorded: the turn may take a feedback again.
            if let Ok(mut r) = self.recent.lock() {
                r.set_given(&session_id, turn_index, false);
            }
        }
        let fate = fate
            .map_err(|e| FeedbackError::Unrecorded(format!("cannot record the feedback: {e:#}")))?;
        Ok((session_id, turn_index, fate))
    }

    /// Ends a session on its client's word (`/rl/end_session`): its end is recorded, and its
    /// last turn without a next state is judged as the last of the session.
    pub fn end_session(&self, session_id: &str) -> Result<(), TurnError> {
        let closed = self
            .sessions
            .lock()
            .map_err(|_| TurnError::Poisoned)?
            .close(session_id, "done");
        match closed {
            Some(c) if self.record_turns => self.record_closed(&c),
            _ => Ok(()),
        }
    }

    fn record_closed(&self, c: &Closed) -> Result<(), TurnError> {
        self.recorder
            .closed(&c.session_id, c.reason, &c.open_turns)
            .map_err(|e| TurnError::Unrecorded(format!("cannot record: {e:#}")))
    }
}
