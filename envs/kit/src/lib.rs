//! What the environment plugins share and the ABI does not carry: the table of open episodes
//! ([`EpisodeTable`]) and what each counts ([`Progress`]), the observations and step outcomes
//! they answer with ([`first_observation`], [`observation`], [`step_outcome`]), the tool calls
//! in an assistant message ([`tool_calls`]) and reading blocks out of the agent's text
//! ([`blocks`]).

use openclaw_plugin_api::serde_json::{self, Value};
use openclaw_plugin_api::{EnvInfo, Message, Observation, PluginResult, StepOutcome};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The open episodes of an environment, by id: ids count up from 1 and are never reused, each
/// episode behind its own lock so episodes step in parallel.
pub struct EpisodeTable<E> {
    episodes: Mutex<HashMap<u64, Arc<Mutex<E>>>>,
    next_id: AtomicU64,
}

impl<E> Default for EpisodeTable<E> {
    fn default() -> Self {
        EpisodeTable {
            episodes: Mutex::default(),
            next_id: AtomicU64::new(1),
        }
    }
}

impl<E> EpisodeTable<E> {
    /// Opens `episode` under a new id.
    pub fn open(&self, episode: E) -> PluginResult<u64> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.episodes
            .lock()
            .map_err(|e| e.to_string())?
            .insert(id, Arc::new(Mutex::new(episode)));
        Ok(id)
    }

    /// The open episode `id`.
    pub fn get(&self, id: u64) -> PluginResult<Arc<Mutex<E>>> {
        self.episodes
            .lock()
            .map_err(|e| e.to_string())?
            .get(&id)
            .cloned()
            .ok_or_else(|| format!("no episode {id} (never started, or closed)"))
    }

    /// Takes episode `id` out of the table (none when it was not open); the caller drops it
    /// outside the table's lock, so removing its work directory holds no other episode up.
    pub fn close(&self, id: u64) -> PluginResult<Option<Arc<Mutex<E>>>> {
        Ok(self.episodes.lock().map_err(|e| e.to_string())?.remove(&id))
    }

    /// Runs `f` on the open episode `id` under the episode's own lock, so other episodes go on.
    pub fn with<R>(&self, id: u64, f: impl FnOnce(&mut E) -> PluginResult<R>) -> PluginResult<R> {
        let episode = self.get(id)?;
        let mut episode = episode.lock().map_err(|e| e.to_string())?;
        f(&mut episode)
    }
}

/// What every episode counts: its turns, the tool calls it ran, and whether it is over.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// The agent's messages stepped so far.
    pub turns: u32,
    /// The tool calls run so far.
    pub tool_calls: u32,
    /// Whether the episode has ended; a step after that is an error.
    pub done: bool,
}

impl Progress {
    /// Counts the next turn of episode `id`; an episode that is over takes no more.
    pub fn next_turn(&mut self, id: u64) -> PluginResult<()> {
        if self.done {
            return Err(format!("episode {id} is over"));
        }
        self.turns += 1;
        Ok(())
    }
}

/// What the agent sees: `messages`, and the tools it may call (an OpenAI `tools` JSON array).
pub fn observation(messages: Vec<Message>, tools_json: &str) -> Observation {
    Observation {
        messages: messages.into(),
        tools_json: tools_json.into(),
    }
}

/// An episode's first observation: the task's prompt as a user message, and the tools on offer.
pub fn first_observation(prompt: &str, tools_json: &str) -> Observation {
    observation(vec![Message::new("user", prompt)], tools_json)
}

/// A step's outcome: what the agent sees next, whether the episode is over (`truncated` when a
/// limit ended it) and the step's facts for the logs. The reward is 0: the environments score
/// an episode after its loop, in `evaluate`.
pub fn step_outcome(
    observation: Observation,
    done: bool,
    truncated: bool,
    metadata: &Value,
) -> StepOutcome {
    StepOutcome {
        observation,
        reward: 0.0,
        done,
        info: EnvInfo {
            truncated,
            metadata_json: metadata.to_string().into(),
        },
    }
}

/// One tool call the agent made, as written: what it names and its arguments, or why it cannot
/// be read. Which tools exist and what they need is the environment's to check.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    /// The OpenAI tool-call id it answers, when it came as one.
    pub id: Option<String>,
    /// The tool's name as given (empty when none was).
    pub name: String,
    /// The arguments (a JSON object), or why they cannot be read.
    pub args: Result<Value, String>,
}

/// The tool calls in an assistant message: its OpenAI `tool_calls` when it has them, else the
/// `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks of its text (the original's
/// form). Unreadable JSON is reported with the original's `json_parse_error` prefix.
pub fn tool_calls(message: &Message) -> Vec<ToolCall> {
    if let Some(raw) = message.tool_calls_json.as_ref().into_option() {
        return match serde_json::from_str::<Value>(raw) {
            Ok(Value::Array(items)) => items.iter().map(openai_call).collect(),
            _ => vec![ToolCall {
                id: None,
                name: String::new(),
                args: Err("tool_calls is not a JSON array".into()),
            }],
        };
    }
    blocks(&message.content, "<tool_call>", "</tool_call>")
        .into_iter()
        .map(|b| match serde_json::from_str::<Value>(b.trim()) {
            Ok(v) => ToolCall {
                id: None,
                name: v["name"].as_str().unwrap_or_default().to_string(),
                args: arguments(&v["arguments"]),
            },
            Err(e) => ToolCall {
                id: None,
                name: String::new(),
                args: Err(format!(
                    "json_parse_error: the tool call is not valid JSON: {e}"
                )),
            },
        })
        .collect()
}

fn openai_call(item: &Value) -> ToolCall {
    let f = &item["function"];
    ToolCall {
        id: item["id"].as_str().map(str::to_string),
        name: f["name"].as_str().unwrap_or_default().to_string(),
        args: arguments(&f["arguments"]),
    }
}

/// Arguments come as a JSON string (OpenAI) or, from some clients and templates, as an object.
fn arguments(v: &Value) -> Result<Value, String> {
    let v = match v {
        Value::String(s) => serde_json::from_str(s)
            .map_err(|e| format!("json_parse_error: the arguments are not valid JSON: {e}"))?,
        other => other.clone(),
    };
    match v {
        Value::Object(_) => Ok(v),
        Value::Null => Err("the tool call has no arguments".into()),
        other => Err(format!("the arguments must be a JSON object, got {other}")),
    }
}

/// The texts between each `open` and the next `close` (an unclosed block runs to the end).
pub fn blocks<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        let body = &rest[at + open.len()..];
        match body.find(close) {
            Some(end) => {
                out.push(&body[..end]);
                rest = &body[end + close.len()..];
            }
            None => {
                out.push(body);
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_and_a_closed_episode_is_gone() {
        let t = EpisodeTable::default();
        let a = t.open("a").unwrap();
        let b = t.open("b").unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(*t.get(b).unwrap().lock().unwrap(), "b");
        assert!(t.close(a).unwrap().is_some());
        assert!(t.close(a).unwrap().is_none());
        let e = t.get(a).err().unwrap();
        assert_eq!(e, "no episode 1 (never started, or closed)");
        assert_eq!(t.open("c").unwrap(), 3, "ids are never reused");
    }

    #[test]
    fn steps_count_turns_until_the_episode_is_over() {
        let t = EpisodeTable::default();
        let id = t.open(Progress::default()).unwrap();
        t.with(id, |p| p.next_turn(id)).unwrap();
        t.with(id, |p| {
            p.done = true;
            Ok(())
        })
        .unwrap();
        let e = t.with(id, |p| p.next_turn(id)).unwrap_err();
        assert_eq!(e, "episode 1 is over");
        assert_eq!(t.with(id, |p| Ok(p.turns)).unwrap(), 1);
        assert!(t.with(id + 1, |_| Ok(())).is_err());
    }

    #[test]
    fn calls_come_from_tool_calls_or_tagged_blocks_and_bad_json_is_named() {
        let mut m = Message::new("assistant", "ignored <tool_call>{}</tool_call>");
        m.tool_calls_json = openclaw_plugin_api::abi_stable::std_types::ROption::RSome(
            r#"[{"id": "c1", "function": {"name": "t", "arguments": "{\"a\": 1}"}}]"#.into(),
        );
        let c = tool_calls(&m);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].id.as_deref(), c[0].name.as_str()), (Some("c1"), "t"));
        assert_eq!(c[0].args.as_ref().unwrap()["a"], 1);
        let m = Message::new(
            "assistant",
            "<tool_call>{\"name\": \"t\", \"arguments\": {\"a\": 2}}</tool_call><tool_call>nope</tool_call>",
        );
        let c = tool_calls(&m);
        assert_eq!(c[0].args.as_ref().unwrap()["a"], 2);
        assert!(c[1]
            .args
            .as_ref()
            .unwrap_err()
            .starts_with("json_parse_error"));
        let m = Message::new(
            "assistant",
            "<tool_call>{\"name\": \"t\", \"arguments\": \"[1]\"}</tool_call>",
        );
        let e = tool_calls(&m).remove(0).args.unwrap_err();
        assert!(e.contains("must be a JSON object"), "{e}");
    }

    #[test]
    fn blocks_run_to_their_close_or_to_the_end() {
        assert_eq!(blocks("x<a>1</a>y<a>2</a>", "<a>", "</a>"), ["1", "2"]);
        assert_eq!(blocks("<a>1</a><a>open", "<a>", "</a>"), ["1", "open"]);
        assert!(blocks("nothing", "<a>", "</a>").is_empty());
    }
}
