//! Sessions and turns: which session a request belongs to, its turn index, and the next state
//! of the session's previous main turn.
//!
//! # The rule
//!
//! A request names its session with `X-Session-Id` or the body's `session_id`; failing those,
//! with the first match of the configured `session_id_pattern` in its system and user messages
//! (OpenClaw writes `sessionId=S` into its prompt). The OpenAI `user` field names an end user,
//! not a conversation, and is never taken as a session id. A request with no id continues the
//! session whose history it repeats: the earlier messages of a recorded turn and that turn's
//! reply, followed by at least one new message. Messages are compared by role (`developer` as
//! `system`), text (a string or text parts, whitespace trimmed at both ends), and tool calls
//! (name and arguments, parsed, with object keys in any order); reasoning, ids and names are
//! ignored, since clients drop or rewrite them.
//!
//! Real clients add ephemeral context after the user's message (OpenClaw's internal-context
//! block) and leave it out of the next request's history. So the history may repeat a turn's
//! prompt without its trailing messages after the last assistant or tool message, as long as
//! it repeats the reply. Messages the next request adds that look like the ones it dropped
//! (same role, same first line) are that request's own ephemeral context and are left out of
//! the turn's next state.
//!
//! The next state of a main turn is what the session's next main request adds after the turn:
//! the user's reply, every tool result, with their roles. With an explicit id and no repeated
//! history, it is what comes after the number of messages the turn spanned, or after the last
//! assistant message.
//!
//! # Limits
//!
//! Two conversations with identical histories and identical replies cannot be told apart
//! without an id: the later one continues the earlier's session. A client that edits or
//! summarises earlier messages (compaction) starts a new session unless it sends an id. A
//! dropped tail is recognised only after the last assistant or tool message.
//!
//! A request for `n` choices takes `n` turn indices, one a choice, all main or all side: sibling
//! turns of one prompt. The next request continues from the one whose reply it repeats (the
//! last of them recorded when replies are identical), which gets the next state; the others get none, as
//! if their session had ended there (their branch did). With an explicit id and no repeated
//! history, the sibling is the one whose reply is the last assistant message before what the
//! request adds; when none is, no sibling gets a next state.
//!
//! Concurrency, as defined here: turn indices are given in arrival order. A turn is linked to a
//! next state only once its reply is known, so a request that arrives while an earlier turn of
//! its session is still generating does not become that turn's next state; the earlier turn
//! gets its next state from the first main request that arrives after it completes and extends
//! it, or none if the session closes first.

use openclaw_buffer::messages::{content_of, to_abi};
use openclaw_chat::ChatMessage;
use openclaw_plugin_api::{Message, NextState, TurnType};
use regex::Regex;
use serde_json::Value;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// What a request says about its session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionHints {
    /// An explicit session id (header or body `session_id`).
    pub session_id: Option<String>,
    /// An explicit turn type; the tracker's default applies otherwise.
    pub turn_type: Option<TurnType>,
    /// The client says the session ends with this request.
    pub done: bool,
    /// Whose request it is, when requests are answered per user (`--adapters per-user`): a
    /// history is then matched only among the same user's requests, so two users who say the
    /// same thing never share a session.
    pub scope: Option<String>,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq)]
pub struct Assignment {
    /// The session.
    pub session_id: String,
    /// The turn's index in the session.
    pub turn_index: u32,
    /// Main or side.
    pub turn_type: TurnType,
    /// Whether the session was created by this request.
    pub new_session: bool,
    /// Choices asked for (`n`): the request's turns are `turn_index..turn_index + choices`.
    pub choices: u32,
    /// The previous main turn's next state, when this request supplies it.
    pub next_state: Option<(u32, NextState)>,
    /// Sibling choices of that turn the client did not go on from: they get no next state.
    pub unfollowed: Vec<u32>,
    /// Where the request's histories start ([`SessionHints::scope`] hashed): its replies are
    /// registered under the same scope.
    pub scope: u64,
}

/// A session that ended, with the main turn left without a next state (judged without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Closed {
    /// The session.
    pub session_id: String,
    /// `done`, `idle` or `evicted`.
    pub reason: &'static str,
    /// The last main turn that never got a next state (with its sibling choices, if any).
    pub open_turns: Vec<u32>,
}

/// Settings of the tracker.
#[derive(Clone, Debug)]
pub struct TrackerOptions {
    /// The turn type of requests that do not say.
    pub default_turn_type: TurnType,
    /// Sessions idle this long are closed by [`SessionTracker::sweep`].
    pub idle_timeout: Duration,
    /// The most sessions kept; beyond it the least recently active one is closed.
    pub max_sessions: usize,
    /// A pattern whose first capture group, found in a system or user message, is the session
    /// id (for clients that write theirs into the prompt).
    pub id_pattern: Option<Regex>,
}

/// A completed main turn (or the completed choices of one request) still waiting for its next
/// state.
#[derive(Clone, Debug)]
struct Awaiting {
    /// The request's first turn index.
    first: u32,
    /// Each completed choice's turn and the key of its reply.
    turns: Vec<(u32, u64)>,
    /// Whether the request had one choice: its turn takes the next state whatever the request
    /// repeats, as a single turn always has.
    single: bool,
    /// Messages of its prompt plus reply.
    span: usize,
    /// The prompt's messages after its last assistant or tool message: what the next request
    /// may leave out.
    droppable: Vec<ChatMessage>,
}

#[derive(Debug)]
struct Session {
    next_turn: u32,
    last_active: Instant,
    /// The latest completed main turn still waiting for its next state.
    awaiting: Option<Awaiting>,
    /// History keys registered for this session, removed when it closes.
    keys: Vec<u64>,
}

/// A history a later request may repeat: a turn's prompt (less `dropped` trailing messages)
/// and its reply.
#[derive(Clone, Debug)]
struct Continuation {
    session_id: String,
    turn: u32,
    dropped: usize,
}

/// Tracks sessions; one per server, behind a lock.
#[derive(Debug)]
pub struct SessionTracker {
    opts: TrackerOptions,
    sessions: HashMap<String, Session>,
    /// Key of a history (prompt prefix + reply) → the turn that produced it.
    histories: HashMap<u64, Continuation>,
    anonymous: u64,
    /// The next turn index of each session id that is not live but was used (earlier in this
    /// run, or in the buffer by an earlier run): a session that comes back goes on from there,
    /// so a (session, turn) pair is never recorded twice in a buffer's life.
    ended: HashMap<String, u32>,
}

/// Hashes JSON with object keys in sorted order, so arguments re-serialised by a client in
/// another key order hash alike (the workspace keeps insertion order in `serde_json` maps).
fn hash_canonical(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            "{".hash(h);
            for k in keys {
                k.hash(h);
                hash_canonical(&map[k], h);
            }
        }
        Value::Array(items) => {
            "[".hash(h);
            items.len().hash(h);
            for i in items {
                hash_canonical(i, h);
            }
        }
        other => other.to_string().hash(h),
    }
}

/// A message's identity for history matching: role, trimmed text and tool calls (name and
/// arguments parsed); reasoning is left out because clients drop it.
fn message_key(m: &ChatMessage) -> u64 {
    let mut h = DefaultHasher::new();
    let role = if m.role == "developer" {
        "system"
    } else {
        m.role.as_str()
    };
    role.hash(&mut h);
    content_of(m).trim().hash(&mut h);
    for c in m.tool_calls.iter().flatten() {
        c.function.name.hash(&mut h);
        let args = match &c.function.arguments {
            Value::String(s) => {
                serde_json::from_str::<Value>(s).unwrap_or(Value::String(s.clone()))
            }
            v => v.clone(),
        };
        hash_canonical(&args, &mut h);
    }
    h.finish()
}

const EMPTY_HISTORY: u64 = 0xcbf29ce484222325;

/// The key of a history `acc` extended by `m`.
fn chain(acc: u64, m: &ChatMessage) -> u64 {
    let mut h = DefaultHasher::new();
    acc.hash(&mut h);
    message_key(m).hash(&mut h);
    h.finish()
}

/// Where the histories of `scope`'s requests start: the empty history, or one keyed by the
/// user.
fn scope_key(scope: Option<&str>) -> u64 {
    match scope {
        None => EMPTY_HISTORY,
        Some(user) => {
            let mut h = DefaultHasher::new();
            EMPTY_HISTORY.hash(&mut h);
            user.hash(&mut h);
            h.finish()
        }
    }
}

/// Cumulative keys: `keys[k]` identifies `messages[..=k]`, from the history `start`.
fn prefix_keys(start: u64, messages: &[ChatMessage]) -> Vec<u64> {
    let mut out = Vec::with_capacity(messages.len());
    let mut acc = start;
    for m in messages {
        acc = chain(acc, m);
        out.push(acc);
    }
    out
}

/// The first line of a message's text, trimmed: how an ephemeral block is recognised again.
fn first_line(m: &ChatMessage) -> String {
    content_of(m)
        .trim()
        .lines()
        .next()
        .unwrap_or("")
        .trim()
        .to_string()
}

/// `added` without its trailing messages that look like one of `dropped` (same role and first
/// line): the client's ephemeral context, which is not part of a next state.
fn without_ephemeral<'a>(
    mut added: &'a [ChatMessage],
    dropped: &[ChatMessage],
) -> &'a [ChatMessage] {
    while let Some((last, rest)) = added.split_last() {
        let ephemeral = dropped
            .iter()
            .any(|d| d.role == last.role && first_line(d) == first_line(last));
        if !ephemeral {
            break;
        }
        added = rest;
    }
    added
}

/// The next state made of the messages a request adds after a turn.
pub fn next_state_of(added: &[ChatMessage]) -> Option<NextState> {
    if added.is_empty() {
        return None;
    }
    let msgs: Vec<Message> = added.iter().map(to_abi).collect();
    let role = if msgs.iter().any(|m| m.role.as_str() == "user") {
        "user"
    } else {
        msgs.first().map(|m| m.role.as_str()).unwrap_or("user")
    };
    let content = if msgs.len() == 1 {
        msgs[0].content.to_string()
    } else {
        msgs.iter()
            .map(|m| format!("[{}] {}", m.role, m.content))
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    Some(NextState {
        role: role.into(),
        content: content.into(),
        messages: msgs.into(),
    })
}

impl SessionTracker {
    /// An empty tracker.
    pub fn new(opts: TrackerOptions) -> Self {
        SessionTracker {
            opts,
            sessions: HashMap::new(),
            histories: HashMap::new(),
            anonymous: 0,
            ended: HashMap::new(),
        }
    }

    /// Goes on from the turns a buffer already holds (their session ids and turn indices):
    /// a session id used before continues its turn numbers, and automatic ids continue after
    /// the highest recorded one.
    pub fn resume(&mut self, used: impl IntoIterator<Item = (String, u32)>) {
        for (id, turn) in used {
            // A client's own `auto-<huge>` id must not exhaust the counter.
            if let Some(n) = id.strip_prefix("auto-").and_then(|n| n.parse::<u64>().ok()) {
                if n < u64::MAX / 2 {
                    self.anonymous = self.anonymous.max(n);
                }
            }
            let next = self.ended.entry(id).or_insert(0);
            *next = (*next).max(turn.saturating_add(1));
        }
    }

    /// The number of live sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The session id a client wrote into its prompt, when the configuration names a pattern.
    fn id_in_prompt(&self, messages: &[ChatMessage]) -> Option<String> {
        let pattern = self.opts.id_pattern.as_ref()?;
        messages
            .iter()
            .filter(|m| matches!(m.role.as_str(), "system" | "developer" | "user"))
            .find_map(|m| {
                let text = content_of(m);
                let caps = pattern.captures(&text)?;
                let id = caps.get(1).unwrap_or(caps.get(0)?).as_str().to_string();
                valid_session_id(&id).then_some(id)
            })
    }

    /// Assigns a request (its OpenAI `messages`) to a session and a turn. Sessions evicted to
    /// make room are returned too.
    pub fn on_request(
        &mut self,
        hints: &SessionHints,
        messages: &[ChatMessage],
        now: Instant,
    ) -> (Assignment, Vec<Closed>) {
        self.on_request_n(hints, messages, 1, now)
    }

    /// [`Self::on_request`] for a request of `choices` choices (at least 1), which takes as
    /// many turn indices.
    pub fn on_request_n(
        &mut self,
        hints: &SessionHints,
        messages: &[ChatMessage],
        choices: u32,
        now: Instant,
    ) -> (Assignment, Vec<Closed>) {
        let choices = choices.max(1);
        let turn_type = hints.turn_type.unwrap_or(self.opts.default_turn_type);
        let scope = scope_key(hints.scope.as_deref());
        let keys = prefix_keys(scope, messages);
        // The longest earlier history this request repeats (with something after it).
        let matched = (0..keys.len().saturating_sub(1))
            .rev()
            .find_map(|k| self.histories.get(&keys[k]).map(|c| (c.clone(), k + 1)));
        let explicit = hints.session_id.clone().or_else(|| {
            let id = self.id_in_prompt(messages)?;
            Some(match &hints.scope {
                Some(user) => user_session_id(user, &id),
                None => id,
            })
        });
        let (session_id, new_session) = match (&explicit, &matched) {
            (Some(id), _) => (id.clone(), !self.sessions.contains_key(id)),
            (None, Some((c, _))) if self.sessions.contains_key(&c.session_id) => {
                (c.session_id.clone(), false)
            }
            _ => loop {
                // Past ids a client chose that look automatic.
                self.anonymous = self.anonymous.saturating_add(1);
                let id = format!("auto-{:06}", self.anonymous);
                if !self.sessions.contains_key(&id) && !self.ended.contains_key(&id) {
                    break (id, true);
                }
            },
        };
        let mut closed = Vec::new();
        if new_session {
            while self.sessions.len() >= self.opts.max_sessions.max(1) {
                let oldest = self
                    .sessions
                    .iter()
                    .min_by_key(|(_, s)| s.last_active)
                    .map(|(id, _)| id.clone())
                    .expect("non-empty");
                closed.push(self.close(&oldest, "evicted").expect("exists"));
            }
            self.sessions.insert(
                session_id.clone(),
                Session {
                    next_turn: self.ended.remove(&session_id).unwrap_or(0),
                    last_active: now,
                    awaiting: None,
                    keys: Vec::new(),
                },
            );
        }
        let s = self.sessions.get_mut(&session_id).expect("present");
        s.last_active = now;
        let turn_index = s.next_turn;
        s.next_turn += choices;
        let mut next_state = None;
        let mut unfollowed = Vec::new();
        if turn_type == TurnType::Main {
            if let Some(aw) = s.awaiting.clone() {
                // What this request adds after the awaited turn: after the history it repeats,
                // else (an explicit id) after the turn's span, else after the last assistant
                // message.
                let repeated = matched.as_ref().filter(|(c, _)| {
                    c.session_id == session_id && aw.turns.iter().any(|t| t.0 == c.turn)
                });
                let (start, dropped) = match repeated {
                    Some((c, len)) => (*len, c.dropped),
                    _ if messages.len() > aw.span && explicit.is_some() => (aw.span, 0),
                    _ => (
                        messages
                            .iter()
                            .rposition(|m| m.role == "assistant")
                            .map(|i| i + 1)
                            .unwrap_or(messages.len().saturating_sub(1)),
                        0,
                    ),
                };
                let dropped = &aw.droppable[aw.droppable.len() - dropped.min(aw.droppable.len())..];
                let added = without_ephemeral(&messages[start.min(messages.len())..], dropped);
                if let Some(ns) = next_state_of(added) {
                    // The choice the client went on from: the one whose history it repeats,
                    // else the one whose reply comes before what it adds (a single turn gets
                    // the next state as before).
                    let echoed = start
                        .checked_sub(1)
                        .and_then(|i| messages.get(i))
                        .map(message_key);
                    let chosen = match repeated {
                        Some((c, _)) => Some(c.turn),
                        None if aw.single => Some(aw.turns[0].0),
                        None => aw.turns.iter().find(|t| Some(t.1) == echoed).map(|t| t.0),
                    };
                    if let Some(turn) = chosen {
                        next_state = Some((turn, ns));
                    }
                    unfollowed = aw
                        .turns
                        .iter()
                        .map(|t| t.0)
                        .filter(|t| Some(*t) != chosen)
                        .collect();
                    s.awaiting = None;
                }
            }
        }
        (
            Assignment {
                session_id,
                turn_index,
                turn_type,
                new_session,
                choices,
                next_state,
                unfollowed,
                scope,
            },
            closed,
        )
    }

    /// Records a completed turn's reply, so the session's next request can be recognised by the
    /// history it repeats and can supply the turn's next state.
    pub fn on_response(
        &mut self,
        a: &Assignment,
        messages: &[ChatMessage],
        reply: &ChatMessage,
        now: Instant,
    ) {
        self.on_choice(a, 0, messages, reply, now)
    }

    /// [`Self::on_response`] for choice `choice` of the request (its turn is
    /// `a.turn_index + choice`).
    pub fn on_choice(
        &mut self,
        a: &Assignment,
        choice: u32,
        messages: &[ChatMessage],
        reply: &ChatMessage,
        now: Instant,
    ) {
        let turn = a.turn_index + choice.min(a.choices.saturating_sub(1));
        let Some(s) = self.sessions.get_mut(&a.session_id) else {
            return; // closed meanwhile
        };
        s.last_active = now;
        // The histories a next request may repeat: the whole prompt and the reply, or the
        // prompt without some of its messages after the last assistant or tool message.
        let n = messages.len();
        let keep_from = messages
            .iter()
            .rposition(|m| m.role == "assistant" || m.role == "tool")
            .map_or(0, |i| i + 1)
            .max(1)
            .min(n);
        let prefix = prefix_keys(a.scope, messages);
        for k in keep_from..=n {
            let acc = if k == 0 { a.scope } else { prefix[k - 1] };
            let key = chain(acc, reply);
            self.histories.insert(
                key,
                Continuation {
                    session_id: a.session_id.clone(),
                    turn,
                    dropped: n - k,
                },
            );
            s.keys.push(key);
        }
        if a.turn_type == TurnType::Main {
            let reply_key = message_key(reply);
            match &mut s.awaiting {
                // A sibling of the awaited choices.
                Some(aw) if aw.first == a.turn_index => aw.turns.push((turn, reply_key)),
                // An older request's, finished late: the newer turn stays awaited.
                Some(aw) if aw.first > a.turn_index => {}
                _ => {
                    s.awaiting = Some(Awaiting {
                        first: a.turn_index,
                        turns: vec![(turn, reply_key)],
                        single: a.choices == 1,
                        span: n + 1,
                        droppable: messages[keep_from..].to_vec(),
                    })
                }
            }
        }
    }

    /// Ends a session; returns what it left open, or `None` if it is unknown.
    pub fn close(&mut self, session_id: &str, reason: &'static str) -> Option<Closed> {
        let s = self.sessions.remove(session_id)?;
        self.ended.insert(session_id.to_string(), s.next_turn);
        for k in s.keys {
            if self
                .histories
                .get(&k)
                .is_some_and(|c| c.session_id == session_id)
            {
                self.histories.remove(&k);
            }
        }
        Some(Closed {
            session_id: session_id.to_string(),
            reason,
            open_turns: s
                .awaiting
                .map(|aw| aw.turns.iter().map(|t| t.0).collect())
                .unwrap_or_default(),
        })
    }

    /// Closes sessions idle for longer than the timeout.
    pub fn sweep(&mut self, now: Instant) -> Vec<Closed> {
        let idle: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, s)| now.duration_since(s.last_active) >= self.opts.idle_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        idle.iter()
            .filter_map(|id| self.close(id, "idle"))
            .collect()
    }
}

/// The session id a user's request gets for an id its client chose (`--adapters per-user`):
/// `<user>@<id>`, so two users who name the same id keep a session each (and neither's reply
/// becomes the other's next state). A user's name has no `@`, so the prefix says whose it is.
pub fn user_session_id(user: &str, id: &str) -> String {
    if id
        .strip_prefix(user)
        .is_some_and(|rest| rest.starts_with('@'))
    {
        return id.to_string();
    }
    format!("{user}@{id}")
}

/// Valid session ids: printable, no path tricks.
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 256
        && !id.contains("..")
        && !id.starts_with('/')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:@+=".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tracker(max: usize) -> SessionTracker {
        SessionTracker::new(TrackerOptions {
            default_turn_type: TurnType::Main,
            idle_timeout: Duration::from_secs(60),
            max_sessions: max,
            id_pattern: None,
        })
    }

    fn none() -> SessionHints {
        SessionHints::default()
    }

    /// Messages as a request carries them (the server parses each once).
    fn msgs(v: &[Value]) -> Vec<ChatMessage> {
        v.iter()
            .map(|m| serde_json::from_value(m.clone()).unwrap())
            .collect()
    }

    fn msg(v: &Value) -> ChatMessage {
        serde_json::from_value(v.clone()).unwrap()
    }

    #[test]
    fn a_headerless_tool_calling_conversation_is_one_session_with_next_states() {
        let mut t = tracker(10);
        let now = Instant::now();
        let sys = json!({"role": "system", "content": "You are an agent."});
        let user = json!({"role": "user", "content": [{"type": "text", "text": "list files"}]});
        let m1 = vec![sys.clone(), user.clone()];
        let (a1, _) = t.on_request(&none(), &msgs(&m1), now);
        assert!(a1.new_session && a1.turn_index == 0 && a1.next_state.is_none());
        // The model calls two tools; the client re-sends the call with arguments re-serialised.
        let reply1 = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": {"path": "."}}},
            {"id": "c2", "type": "function", "function": {"name": "pwd", "arguments": {}}}]});
        t.on_response(&a1, &msgs(&m1), &msg(&reply1), now);
        let resent = json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \".\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "pwd", "arguments": "{}"}}]});
        let m2 = vec![
            sys.clone(),
            user.clone(),
            resent.clone(),
            json!({"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt"}),
            json!({"role": "tool", "tool_call_id": "c2", "content": "/home"}),
        ];
        let (a2, _) = t.on_request(&none(), &msgs(&m2), now);
        assert_eq!(a2.session_id, a1.session_id);
        assert_eq!(a2.turn_index, 1);
        let (turn, ns) = a2.next_state.clone().expect("next state of turn 0");
        assert_eq!(turn, 0);
        assert_eq!(ns.role.as_str(), "tool");
        assert_eq!(ns.messages.len(), 2, "every tool result");
        assert!(ns.content.contains("a.txt b.txt") && ns.content.contains("/home"));
        // Then the user replies to the final answer.
        let reply2 = json!({"role": "assistant", "content": "There are two files."});
        t.on_response(&a2, &msgs(&m2), &msg(&reply2), now);
        let mut m3 = m2.clone();
        m3.push(reply2);
        m3.push(json!({"role": "user", "content": "thanks!"}));
        let (a3, _) = t.on_request(&none(), &msgs(&m3), now);
        assert_eq!(a3.session_id, a1.session_id);
        let (turn, ns) = a3.next_state.unwrap();
        assert_eq!(
            (turn, ns.role.as_str(), ns.content.as_str()),
            (1, "user", "thanks!")
        );
        // An unrelated conversation is another session.
        let (b, _) = t.on_request(
            &none(),
            &msgs(&[json!({"role": "user", "content": "hello"})]),
            now,
        );
        assert_ne!(b.session_id, a1.session_id);
    }

    /// OpenClaw's ephemeral context block, as it ends each of its requests.
    fn internal_context() -> Value {
        json!({"role": "user", "content": [{"type": "text", "text":
            "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"}]})
    }

    #[test]
    fn a_client_that_drops_its_ephemeral_tail_continues_its_session_and_the_tail_is_no_next_state()
    {
        let mut t = tracker(10);
        let now = Instant::now();
        let sys = json!({"role": "system", "content": "You are a personal assistant running inside OpenClaw."});
        let u1 = json!({"role": "user", "content": "[Tue 2026-12-01 18:22 UTC] Write a short haiku about the sea.\n\nRuntime: agent=main | sessionId=verify1 | os=Linux"});
        let m1 = vec![sys.clone(), u1.clone(), internal_context()];
        let (a1, _) = t.on_request(&none(), &msgs(&m1), now);
        // The reply as the server recorded it; the client re-sends it with a leading space.
        t.on_response(
            &a1,
            &msgs(&m1),
            &msg(&json!({"role": "assistant", "content": "Waves fold into foam"})),
            now,
        );
        let u2 = json!({"role": "user", "content": "[Tue 2026-12-01 18:23 UTC] Plain text, one line please."});
        let m2 = vec![
            sys.clone(),
            u1.clone(),
            json!({"role": "assistant", "content": " Waves fold into foam\n"}),
            u2.clone(),
            internal_context(),
        ];
        let (a2, _) = t.on_request(&none(), &msgs(&m2), now);
        assert_eq!(
            (a2.session_id.as_str(), a2.turn_index),
            (a1.session_id.as_str(), 1)
        );
        let (turn, ns) = a2.next_state.clone().expect("turn 0's next state");
        assert_eq!(turn, 0);
        assert_eq!(
            ns.messages.len(),
            1,
            "the internal context is not the user's reply"
        );
        assert_eq!(ns.role.as_str(), "user");
        assert!(
            ns.content.contains("Plain text, one line please."),
            "{}",
            ns.content
        );
        // The third request drops the second one's block too.
        t.on_response(
            &a2,
            &msgs(&m2),
            &msg(&json!({"role": "assistant", "content": "Foam on the shore."})),
            now,
        );
        let m3 = vec![
            sys,
            u1,
            json!({"role": "assistant", "content": "Waves fold into foam"}),
            u2,
            json!({"role": "assistant", "content": [{"type": "text", "text": "Foam on the shore."}]}),
            json!({"role": "user", "content": "[Tue 2026-12-01 18:25 UTC] Thanks, that's better."}),
            internal_context(),
        ];
        let (a3, _) = t.on_request(&none(), &msgs(&m3), now);
        assert_eq!(
            (a3.session_id.as_str(), a3.turn_index),
            (a1.session_id.as_str(), 2)
        );
        let (turn, ns) = a3.next_state.unwrap();
        assert_eq!((turn, ns.messages.len()), (1, 1));
        assert!(ns.content.ends_with("Thanks, that's better."));
    }

    /// The OpenClaw agent's own requests for one three-message conversation, replayed through
    /// the tracker with the replies the next requests repeat.
    #[test]
    fn the_recorded_openclaw_conversation_is_one_session_with_user_next_states() {
        let recording: Value =
            serde_json::from_str(include_str!("fixtures/openclaw-3-requests.json")).unwrap();
        let requests: Vec<Vec<ChatMessage>> = recording["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| msgs(r["messages"].as_array().unwrap()))
            .collect();
        let mut t = tracker(10);
        let now = Instant::now();
        let mut assignments = Vec::new();
        for (i, m) in requests.iter().enumerate() {
            let (a, _) = t.on_request(&none(), m, now);
            // The reply is the assistant message the next request repeats (the server's own
            // record of it has no leading space).
            if let Some(next) = requests.get(i + 1) {
                let reply = next.iter().rev().find(|m| m.role == "assistant").unwrap();
                let mut recorded = reply.clone();
                recorded.content = Some(openclaw_chat::MessageContent::Text(
                    content_of(reply).trim().to_string(),
                ));
                t.on_response(&a, m, &recorded, now);
            }
            assignments.push(a);
        }
        let ids: Vec<&str> = assignments.iter().map(|a| a.session_id.as_str()).collect();
        assert_eq!(ids, vec![ids[0]; 3], "one session");
        assert_eq!(
            assignments.iter().map(|a| a.turn_index).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        let next: Vec<(u32, String, usize)> = assignments[1..]
            .iter()
            .map(|a| {
                let (turn, ns) = a.next_state.clone().expect("a next state");
                (turn, ns.content.to_string(), ns.messages.len())
            })
            .collect();
        assert_eq!(next[0].0, 0);
        assert!(
            next[0].1.contains("Please write plain text, one line."),
            "{}",
            next[0].1
        );
        assert_eq!(next[1].0, 1);
        assert!(
            next[1].1.contains("Thanks, that's better."),
            "{}",
            next[1].1
        );
        for (_, content, n) in &next {
            assert_eq!(*n, 1, "only the user's message: {content}");
            assert!(!content.contains("OPENCLAW_INTERNAL_CONTEXT"), "{content}");
        }
    }

    #[test]
    fn a_session_id_written_into_the_prompt_wins_when_a_pattern_is_configured() {
        let mut t = SessionTracker::new(TrackerOptions {
            default_turn_type: TurnType::Main,
            idle_timeout: Duration::from_secs(60),
            max_sessions: 10,
            id_pattern: Some(Regex::new("sessionId=([^ |]+)").unwrap()),
        });
        let now = Instant::now();
        let m = |text: &str| {
            msgs(&[
                json!({"role": "user", "content": format!("{text}\nRuntime: agent=main | sessionId=verify1 | os=Linux")}),
            ])
        };
        let (a, _) = t.on_request(&none(), &m("hello"), now);
        assert_eq!(a.session_id, "verify1");
        // Another conversation with the same id, repeating no history: the same session.
        let (b, _) = t.on_request(&none(), &m("something else"), now);
        assert_eq!((b.session_id.as_str(), b.turn_index), ("verify1", 1));
        // A header still wins over the prompt.
        let hinted = SessionHints {
            session_id: Some("from-header".into()),
            ..Default::default()
        };
        assert_eq!(
            t.on_request(&hinted, &m("x"), now).0.session_id,
            "from-header"
        );
        // Without a pattern the text is only text.
        let mut plain = tracker(10);
        assert!(plain
            .on_request(&none(), &m("hello"), now)
            .0
            .session_id
            .starts_with("auto-"));
    }

    #[test]
    fn tool_call_arguments_in_another_key_order_still_match() {
        let mut t = tracker(10);
        let now = Instant::now();
        let m1 = vec![json!({"role": "user", "content": "read the file"})];
        let (a1, _) = t.on_request(&none(), &msgs(&m1), now);
        let reply = json!({"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\",\"limit\":{\"lines\":5,\"from\":1}}"}}]});
        t.on_response(&a1, &msgs(&m1), &msg(&reply), now);
        let resent = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"limit\": {\"from\": 1, \"lines\": 5}, \"path\": \"a.txt\"}"}}]});
        let m2 = vec![
            m1[0].clone(),
            resent,
            json!({"role": "tool", "tool_call_id": "call_1", "content": "hello"}),
        ];
        let (a2, _) = t.on_request(&none(), &msgs(&m2), now);
        assert_eq!(a2.session_id, a1.session_id);
        let (_, ns) = a2.next_state.unwrap();
        assert_eq!((ns.role.as_str(), ns.content.as_str()), ("tool", "hello"));
        // Tool results are never taken for a dropped tail: a request that leaves them out
        // does not continue the session.
        let m3 = vec![
            m1[0].clone(),
            json!({"role": "assistant", "content": "done"}),
            json!({"role": "user", "content": "and?"}),
        ];
        assert!(t.on_request(&none(), &msgs(&m3), now).0.new_session);
    }

    #[test]
    fn explicit_ids_side_turns_and_done() {
        let mut t = tracker(10);
        let now = Instant::now();
        let hints = SessionHints {
            session_id: Some("s1".into()),
            ..Default::default()
        };
        let m1 = vec![json!({"role": "user", "content": "q"})];
        let (a1, _) = t.on_request(&hints, &msgs(&m1), now);
        t.on_response(
            &a1,
            &msgs(&m1),
            &msg(&json!({"role": "assistant", "content": "a"})),
            now,
        );
        // A side call (heartbeat) in between gets a turn but is not a next state.
        let side = SessionHints {
            turn_type: Some(TurnType::Side),
            ..hints.clone()
        };
        let (s, _) = t.on_request(
            &side,
            &msgs(&[json!({"role": "user", "content": "heartbeat"})]),
            now,
        );
        assert_eq!(
            (s.turn_index, s.turn_type, s.next_state.is_none()),
            (1, TurnType::Side, true)
        );
        let m2 = vec![
            m1[0].clone(),
            json!({"role": "assistant", "content": "a"}),
            json!({"role": "user", "content": "no, redo it"}),
        ];
        let (a2, _) = t.on_request(&hints, &msgs(&m2), now);
        assert_eq!(
            a2.next_state.as_ref().unwrap().1.content.as_str(),
            "no, redo it"
        );
        t.on_response(
            &a2,
            &msgs(&m2),
            &msg(&json!({"role": "assistant", "content": "b"})),
            now,
        );
        let closed = t.close("s1", "done").unwrap();
        assert_eq!(
            closed.open_turns.first().copied(),
            Some(2),
            "the last main turn had no next state"
        );
        assert!(t.is_empty());
    }

    /// Ids and turn numbers go on across closes and restarts: a client's own id that comes back
    /// continues its turns, and automatic ids continue after the buffer's highest.
    #[test]
    fn session_ids_and_turns_never_repeat_across_closes_and_restarts() {
        let now = Instant::now();
        let hints = SessionHints {
            session_id: Some("s1".into()),
            ..Default::default()
        };
        let ask = |t: &mut SessionTracker, hints: &SessionHints, q: &str| {
            let (a, _) = t.on_request(hints, &msgs(&[json!({"role": "user", "content": q})]), now);
            (a.session_id, a.turn_index)
        };
        // A restart on a buffer whose turns reached s1 turn 4 and auto-000007.
        let mut t = tracker(10);
        t.resume([
            ("s1".to_string(), 4),
            ("s1".to_string(), 2),
            ("auto-000007".to_string(), 0),
        ]);
        assert_eq!(ask(&mut t, &hints, "q"), ("s1".into(), 5));
        assert_eq!(ask(&mut t, &none(), "other"), ("auto-000008".into(), 0));
        // Closed, then back within the same run.
        t.close("s1", "done").unwrap();
        assert_eq!(ask(&mut t, &hints, "again"), ("s1".into(), 6));
        // A client that chose the next automatic id itself keeps it; automatic ids skip it.
        let chosen = SessionHints {
            session_id: Some("auto-000009".into()),
            ..Default::default()
        };
        assert_eq!(ask(&mut t, &chosen, "mine"), ("auto-000009".into(), 0));
        assert_eq!(ask(&mut t, &none(), "fresh"), ("auto-000010".into(), 0));
    }

    #[test]
    fn a_request_during_an_unfinished_turn_does_not_become_its_next_state() {
        let mut t = tracker(10);
        let now = Instant::now();
        let hints = SessionHints {
            session_id: Some("s".into()),
            ..Default::default()
        };
        let m = vec![json!({"role": "user", "content": "q"})];
        let (a1, _) = t.on_request(&hints, &msgs(&m), now);
        let (a2, _) = t.on_request(&hints, &msgs(&m), now); // concurrent, a1 still generating
        assert_eq!((a1.turn_index, a2.turn_index), (0, 1));
        assert!(a2.next_state.is_none());
        t.on_response(
            &a1,
            &msgs(&m),
            &msg(&json!({"role": "assistant", "content": "x"})),
            now,
        );
        t.on_response(
            &a2,
            &msgs(&m),
            &msg(&json!({"role": "assistant", "content": "y"})),
            now,
        );
        // The next request follows turn 1, the later one: turn 0 stays without a next state.
        let m3 = vec![
            m[0].clone(),
            json!({"role": "assistant", "content": "y"}),
            json!({"role": "user", "content": "ok"}),
        ];
        let (a3, _) = t.on_request(&hints, &msgs(&m3), now);
        assert_eq!(a3.next_state.unwrap().0, 1);
    }

    #[test]
    fn idle_sessions_close_and_the_cap_evicts_the_least_recent() {
        let mut t = tracker(2);
        let t0 = Instant::now();
        let req = |t: &mut SessionTracker, text: &str, at: Instant| {
            let m = vec![json!({"role": "user", "content": text})];
            let (a, closed) = t.on_request(&none(), &msgs(&m), at);
            t.on_response(
                &a,
                &msgs(&m),
                &msg(&json!({"role": "assistant", "content": "r"})),
                at,
            );
            (a, closed)
        };
        let (a, _) = req(&mut t, "one", t0);
        req(&mut t, "two", t0 + Duration::from_secs(1));
        let (_, closed) = req(&mut t, "three", t0 + Duration::from_secs(2));
        assert_eq!(closed.len(), 1);
        assert_eq!(
            (
                closed[0].session_id.as_str(),
                closed[0].reason,
                closed[0].open_turns.first().copied()
            ),
            (a.session_id.as_str(), "evicted", Some(0))
        );
        assert_eq!(t.len(), 2);
        let closed = t.sweep(t0 + Duration::from_millis(61_500));
        assert_eq!(closed.len(), 1, "only the session idle for 60 s");
        assert_eq!(closed[0].reason, "idle");
        // A closed session's conversation no longer continues it.
        let m = vec![
            json!({"role": "user", "content": "one"}),
            json!({"role": "assistant", "content": "r"}),
            json!({"role": "user", "content": "more"}),
        ];
        let (again, _) = t.on_request(&none(), &msgs(&m), t0 + Duration::from_secs(63));
        assert!(again.new_session);
    }

    /// A request for 3 choices takes 3 turns; the next request goes on from the choice whose
    /// reply it repeats, which alone gets the next state, and the others are unfollowed; an
    /// explicit id finds the choice by its reply; a close lists every open choice.
    #[test]
    fn choices_are_sibling_turns_and_the_echoed_one_gets_the_next_state() {
        let mut t = tracker(10);
        let now = Instant::now();
        let user = json!({"role": "user", "content": "Name a colour."});
        let m1 = vec![user.clone()];
        let (a, _) = t.on_request_n(&none(), &msgs(&m1), 3, now);
        assert_eq!((a.turn_index, a.choices), (0, 3));
        let reply = |text: &str| json!({"role": "assistant", "content": text});
        // Choices finish in any order.
        for (choice, text) in [(2, "Blue."), (0, "Red."), (1, "Green.")] {
            t.on_choice(&a, choice, &msgs(&m1), &msg(&reply(text)), now);
        }
        let m2 = vec![
            user.clone(),
            reply("Green."),
            json!({"role": "user", "content": "Why?"}),
        ];
        let (b, _) = t.on_request(&none(), &msgs(&m2), now);
        assert_eq!(
            (b.session_id.as_str(), b.turn_index),
            (a.session_id.as_str(), 3)
        );
        let (turn, ns) = b
            .next_state
            .clone()
            .expect("the echoed choice's next state");
        assert_eq!((turn, ns.content.as_str()), (1, "Why?"));
        assert_eq!(b.unfollowed, [2, 0]);

        // With an explicit id and no repeated history, the choice is found by its reply.
        let hints = SessionHints {
            session_id: Some("x".into()),
            ..none()
        };
        let (c, _) = t.on_request_n(&hints, &msgs(&m1), 2, now);
        t.on_choice(&c, 0, &msgs(&m1), &msg(&reply("One.")), now);
        t.on_choice(&c, 1, &msgs(&m1), &msg(&reply("Two.")), now);
        let edited = vec![
            json!({"role": "system", "content": "compacted"}),
            reply("Two."),
            json!({"role": "user", "content": "More."}),
        ];
        let (d, _) = t.on_request(&hints, &msgs(&edited), now);
        assert_eq!(d.turn_index, 2);
        assert_eq!(d.next_state.map(|(turn, _)| turn), Some(1));
        assert_eq!(d.unfollowed, [0]);
        // A reply no choice gave: no next state for either.
        let (e, _) = t.on_request_n(&hints, &msgs(&m1), 2, now);
        t.on_choice(&e, 0, &msgs(&m1), &msg(&reply("A.")), now);
        t.on_choice(&e, 1, &msgs(&m1), &msg(&reply("B.")), now);
        let other = vec![
            user.clone(),
            reply("C."),
            json!({"role": "user", "content": "?"}),
        ];
        let (f, _) = t.on_request(&hints, &msgs(&other), now);
        assert!(f.next_state.is_none());
        assert_eq!(f.unfollowed, [3, 4]);
        t.on_choice(&f, 0, &msgs(&other), &msg(&reply("D.")), now);
        let (g, _) = t.on_request_n(&hints, &msgs(&m1), 2, now);
        assert_eq!(g.turn_index, 6);
        t.on_choice(&g, 1, &msgs(&m1), &msg(&reply("E.")), now);
        t.on_choice(&g, 0, &msgs(&m1), &msg(&reply("F.")), now);
        let closed = t.close("x", "done").unwrap();
        assert_eq!(closed.open_turns, [7, 6]);
    }

    /// Per user, a history is matched among the user's own requests: two users who send the
    /// same conversation get two sessions, and each continues their own.
    #[test]
    fn two_users_who_say_the_same_thing_keep_their_own_sessions() {
        let mut t = tracker(10);
        let now = Instant::now();
        let as_user = |u: &str| SessionHints {
            scope: Some(u.into()),
            ..none()
        };
        let m1 = vec![json!({"role": "user", "content": "Describe the owl."})];
        let reply = json!({"role": "assistant", "content": "An owl hoots."});
        let (a, _) = t.on_request(&as_user("alice"), &msgs(&m1), now);
        t.on_response(&a, &msgs(&m1), &msg(&reply), now);
        let (b, _) = t.on_request(&as_user("bob"), &msgs(&m1), now);
        t.on_response(&b, &msgs(&m1), &msg(&reply), now);
        assert_ne!(a.session_id, b.session_id);
        let m2 = vec![
            m1[0].clone(),
            reply.clone(),
            json!({"role": "user", "content": "Thanks."}),
        ];
        let (a2, _) = t.on_request(&as_user("alice"), &msgs(&m2), now);
        let (b2, _) = t.on_request(&as_user("bob"), &msgs(&m2), now);
        assert_eq!((a2.session_id, b2.session_id), (a.session_id, b.session_id));
        assert_eq!(a2.next_state.map(|n| n.0), Some(0));
        assert_eq!(b2.next_state.map(|n| n.0), Some(0));
        // Without a scope the same history continues the latest session it came from.
        let (c, _) = t.on_request(&none(), &msgs(&m1), now);
        t.on_response(&c, &msgs(&m1), &msg(&reply), now);
        let (c2, _) = t.on_request(&none(), &msgs(&m2), now);
        assert_eq!(c2.session_id, c.session_id);
    }

    #[test]
    fn an_id_a_users_prompt_names_is_that_users_own() {
        let mut t = SessionTracker::new(TrackerOptions {
            id_pattern: Some(regex::Regex::new(r"session:(\S+)").unwrap()),
            ..tracker(10).opts
        });
        let now = Instant::now();
        let m = vec![json!({"role": "system", "content": "session:room-7"})];
        let scoped = |u: &str| SessionHints {
            scope: Some(u.into()),
            ..none()
        };
        let (a, _) = t.on_request(&scoped("alice"), &msgs(&m), now);
        let (b, _) = t.on_request(&scoped("bob"), &msgs(&m), now);
        assert_eq!(
            (a.session_id.as_str(), b.session_id.as_str()),
            ("alice@room-7", "bob@room-7")
        );
        let (c, _) = t.on_request(&none(), &msgs(&m), now);
        assert_eq!(c.session_id, "room-7");
        assert_eq!(user_session_id("alice", "alice@x"), "alice@x");
        assert_eq!(user_session_id("bob", "alice@x"), "bob@alice@x");
    }
}
