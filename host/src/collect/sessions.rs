//! Sessions and turns: which session a request belongs to, its turn index, and the next state
//! of the session's previous main turn.
//!
//! A request names its session with `X-Session-Id` (or the body's `session_id`, or the OpenAI
//! `user` field). Stock agent clients send none of these, so a request whose messages extend an
//! earlier request's messages plus that request's reply continues that session. The next state
//! of a main turn is everything the next main request of its session adds after the turn: the
//! user's reply, every tool result, with their roles.
//!
//! Concurrency, as defined here: turn indices are given in arrival order. A turn is linked to a
//! next state only once its reply is known, so a request that arrives while an earlier turn of
//! its session is still generating does not become that turn's next state; the earlier turn
//! gets its next state from the first main request that arrives after it completes and extends
//! it, or none if the session closes first.

use crate::data::messages::{content_of, to_abi};
use openclaw_chat::ChatMessage;
use openclaw_plugin_api::{Message, NextState, TurnType};
use serde_json::Value;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// What a request says about its session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionHints {
    /// An explicit session id (header, body `session_id` or `user`).
    pub session_id: Option<String>,
    /// An explicit turn type; the tracker's default applies otherwise.
    pub turn_type: Option<TurnType>,
    /// The client says the session ends with this request.
    pub done: bool,
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
    /// The previous main turn's next state, when this request supplies it.
    pub next_state: Option<(u32, NextState)>,
}

/// A session that ended, with the main turn left without a next state (judged without one).
#[derive(Clone, Debug, PartialEq)]
pub struct Closed {
    /// The session.
    pub session_id: String,
    /// `done`, `idle` or `evicted`.
    pub reason: &'static str,
    /// The last main turn that never got a next state.
    pub open_turn: Option<u32>,
}

/// Settings of the tracker.
#[derive(Clone, Copy, Debug)]
pub struct TrackerOptions {
    /// The turn type of requests that do not say.
    pub default_turn_type: TurnType,
    /// Sessions idle this long are closed by [`SessionTracker::sweep`].
    pub idle_timeout: Duration,
    /// The most sessions kept; beyond it the least recently active one is closed.
    pub max_sessions: usize,
}

#[derive(Debug)]
struct Session {
    next_turn: u32,
    last_active: Instant,
    /// The latest completed main turn still waiting for its next state: its index and the
    /// number of messages its prompt plus reply span.
    awaiting: Option<(u32, usize)>,
    /// Prefix keys registered for this session, removed when it closes.
    keys: Vec<u64>,
}

/// Tracks sessions; one per server, behind a lock.
#[derive(Debug)]
pub struct SessionTracker {
    opts: TrackerOptions,
    sessions: HashMap<String, Session>,
    /// Hash of a conversation (prompt + reply) → the session that produced it.
    prefixes: HashMap<u64, String>,
    anonymous: u64,
}

/// A message's identity for prefix matching: role, text and tool calls (name and arguments
/// parsed, so re-serialised JSON still matches); reasoning is left out because clients drop it.
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
        args.to_string().hash(&mut h);
    }
    h.finish()
}

/// Cumulative keys: `keys[k]` identifies `messages[..=k]`.
fn prefix_keys(messages: &[ChatMessage]) -> Vec<u64> {
    let mut out = Vec::with_capacity(messages.len());
    let mut acc = 0xcbf29ce484222325u64;
    for m in messages {
        let mut h = DefaultHasher::new();
        acc.hash(&mut h);
        message_key(m).hash(&mut h);
        acc = h.finish();
        out.push(acc);
    }
    out
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
            prefixes: HashMap::new(),
            anonymous: 0,
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

    /// Assigns a request (its OpenAI `messages`) to a session and a turn. Sessions evicted to
    /// make room are returned too.
    pub fn on_request(
        &mut self,
        hints: &SessionHints,
        messages: &[ChatMessage],
        now: Instant,
    ) -> (Assignment, Vec<Closed>) {
        let turn_type = hints.turn_type.unwrap_or(self.opts.default_turn_type);
        let keys = prefix_keys(messages);
        // The longest earlier conversation this request extends, if any.
        let matched = (0..keys.len().saturating_sub(1))
            .rev()
            .find_map(|k| self.prefixes.get(&keys[k]).map(|s| (s.clone(), k + 1)));
        let (session_id, new_session) = match (&hints.session_id, &matched) {
            (Some(id), _) => (id.clone(), !self.sessions.contains_key(id)),
            (None, Some((id, _))) if self.sessions.contains_key(id) => (id.clone(), false),
            _ => {
                self.anonymous += 1;
                (format!("auto-{:06}", self.anonymous), true)
            }
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
                    next_turn: 0,
                    last_active: now,
                    awaiting: None,
                    keys: Vec::new(),
                },
            );
        }
        let s = self.sessions.get_mut(&session_id).expect("present");
        s.last_active = now;
        let turn_index = s.next_turn;
        s.next_turn += 1;
        let mut next_state = None;
        if turn_type == TurnType::Main {
            if let Some((turn, span)) = s.awaiting {
                // What this request adds after the awaited turn: by prefix when it extends it,
                // else the messages after its last assistant message.
                let start = match &matched {
                    Some((id, len)) if *id == session_id && *len == span => span,
                    _ if messages.len() > span && hints.session_id.is_some() => span,
                    _ => messages
                        .iter()
                        .rposition(|m| m.role == "assistant")
                        .map(|i| i + 1)
                        .unwrap_or(messages.len().saturating_sub(1)),
                };
                if let Some(ns) = next_state_of(&messages[start.min(messages.len())..]) {
                    next_state = Some((turn, ns));
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
                next_state,
            },
            closed,
        )
    }

    /// Records a completed turn's reply, so the session's next request can be recognised and
    /// can supply the turn's next state.
    pub fn on_response(
        &mut self,
        a: &Assignment,
        messages: &[ChatMessage],
        reply: &ChatMessage,
        now: Instant,
    ) {
        let Some(s) = self.sessions.get_mut(&a.session_id) else {
            return; // closed meanwhile
        };
        s.last_active = now;
        let mut convo = messages.to_vec();
        convo.push(reply.clone());
        let key = *prefix_keys(&convo).last().expect("non-empty");
        self.prefixes.insert(key, a.session_id.clone());
        s.keys.push(key);
        if a.turn_type == TurnType::Main {
            let newer = s.awaiting.is_none_or(|(t, _)| t < a.turn_index);
            if newer {
                s.awaiting = Some((a.turn_index, convo.len()));
            }
        }
    }

    /// Ends a session; returns what it left open, or `None` if it is unknown.
    pub fn close(&mut self, session_id: &str, reason: &'static str) -> Option<Closed> {
        let s = self.sessions.remove(session_id)?;
        for k in s.keys {
            if self.prefixes.get(&k).is_some_and(|v| v == session_id) {
                self.prefixes.remove(&k);
            }
        }
        Some(Closed {
            session_id: session_id.to_string(),
            reason,
            open_turn: s.awaiting.map(|(t, _)| t),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tracker(max: usize) -> SessionTracker {
        SessionTracker::new(TrackerOptions {
            default_turn_type: TurnType::Main,
            idle_timeout: Duration::from_secs(60),
            max_sessions: max,
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
            closed.open_turn,
            Some(2),
            "the last main turn had no next state"
        );
        assert!(t.is_empty());
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
                closed[0].open_turn
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
}
