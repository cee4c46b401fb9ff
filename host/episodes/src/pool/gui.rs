//! The original's GUI pool dialect (`/allocate {episode_id}`, `/reset {task_config}`,
//! `/get_obs`, `/step {action, sleep_after_execution}`, `/evaluate`), and what a run here needs
//! to act through it: the `computer_use` tool (a copy of `envs/gui`'s schema: the host depends
//! on no environment plugin), the tool calls of a message, and each call as the pyautogui code
//! the original's OSWorld workers run.

use openclaw_plugin_api::Message;
use serde_json::{json, Value};

/// The tool's name.
pub const TOOL: &str = "computer_use";
/// Unreadable calls (or messages without one) before an episode ends (`envs/gui`'s
/// `max_parse_errors`).
pub const MAX_PARSE_ERRORS: u32 = 3;
/// The screen of the original's workers that pyautogui coordinates are for (OSWorld's
/// default `screen_size`): the 0..999 grid is scaled to it.
pub const SCREEN: (u32, u32) = (1920, 1080);
/// Seconds the original's worker waits after an action before it observes the screen.
pub const SLEEP_AFTER: f64 = 1.0;
/// Characters of a remote worker's accessibility tree shown (`envs/gui`'s `ax_chars`).
pub const TREE_CHARS: usize = 6000;

/// Every action, in the schema's order.
pub const ACTIONS: [&str; 13] = [
    "key",
    "type",
    "mouse_move",
    "left_click",
    "left_click_drag",
    "right_click",
    "middle_click",
    "double_click",
    "triple_click",
    "scroll",
    "hscroll",
    "wait",
    "terminate",
];

/// The tool's OpenAI schema (a `tools` array of one function), as `envs/gui` offers it.
pub fn schema() -> String {
    let description = "Use a mouse and keyboard to interact with a computer, and take screenshots.\n\
* This is an interface to a web page in a browser window. You do not have access to a terminal, an address bar or applications menu.\n\
* Some pages may take time to process actions, so you may need to wait and look at the page again to see the results of your actions.\n\
* The screen's resolution is 1000x1000: coordinates are on a grid from 0 to 999 in both directions, (0, 0) at the top left and (999, 999) at the bottom right, whatever the window's size in pixels.\n\
* Whenever you intend to move the cursor to click on an element like a button, consult the page (its accessibility tree, or a screenshot) to determine the coordinates of the element before moving the cursor.\n\
* If you tried clicking on a link or button but it failed, try adjusting your cursor position so that the tip of the cursor falls on the element that you want to click.\n\
* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the element. Don't click boxes on their edges unless asked.";
    let action = "The action to perform. The available actions are:\n\
* `key`: Performs key down presses on the arguments passed in order, then performs key releases in reverse order.\n\
* `type`: Type a string of text on the keyboard.\n\
* `mouse_move`: Move the cursor to a specified (x, y) coordinate on the screen.\n\
* `left_click`: Click the left mouse button (at `coordinate` when given, else where the cursor is).\n\
* `left_click_drag`: Click and drag the cursor from where it is to a specified (x, y) coordinate on the screen.\n\
* `right_click`: Click the right mouse button.\n\
* `middle_click`: Click the middle mouse button.\n\
* `double_click`: Double-click the left mouse button.\n\
* `triple_click`: Triple-click the left mouse button.\n\
* `scroll`: Performs a scroll of the mouse scroll wheel.\n\
* `hscroll`: Performs a horizontal scroll of the mouse scroll wheel.\n\
* `wait`: Wait specified seconds for the change to happen.\n\
* `terminate`: Terminate the current task and report its completion status.";
    let tool = json!({
        "type": "function",
        "function": {
            "name": TOOL,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    "action": {"description": action, "enum": ACTIONS, "type": "string"},
                    "keys": {"description": "Required only by `action=key`.", "type": "array", "items": {"type": "string"}},
                    "text": {"description": "Required only by `action=type`.", "type": "string"},
                    "coordinate": {"description": "(x, y): The x (from the left edge) and y (from the top edge) coordinates, each from 0 to 999, to move the mouse to. Required only by `action=mouse_move` and `action=left_click_drag`; optional for the clicks and the scrolls.", "type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 999}},
                    "pixels": {"description": "The amount of scrolling to perform. For `scroll`, positive values scroll up and negative values scroll down; for `hscroll`, positive values scroll right and negative values scroll left. Required only by `action=scroll` and `action=hscroll`.", "type": "integer"},
                    "time": {"description": "The seconds to wait (at most 10). Required only by `action=wait`.", "type": "number"},
                    "status": {"description": "The status of the task. Required only by `action=terminate`.", "type": "string", "enum": ["success", "failure"]}
                },
                "required": ["action"]
            }
        }
    });
    format!("[{tool}]")
}

/// The first message of an episode on one of the original's workers: the instruction, how to
/// act, and the accessibility tree it sent (its screenshot is not shown: the policy reads text).
pub fn prompt(instruction: &str, tree: &str) -> String {
    format!(
        "{}\n\nThe screen shows a computer's display. Act on it with the `{TOOL}` tool, one action per call; its coordinates are on a grid from 0 to 999 in both directions ((0, 0) is the top left corner, (999, 999) the bottom right), whatever the screen's size. When the task is done, call it with the action `terminate`.\n\n{tree}",
        instruction.trim()
    )
}

/// What one of the original's observations shows the policy: its accessibility tree, cut to
/// [`TREE_CHARS`].
pub fn page_text(observation: &Value) -> String {
    match observation["accessibility_tree"].as_str() {
        Some(t) if !t.trim().is_empty() => {
            let n = t.chars().count();
            if n <= TREE_CHARS {
                format!("The screen's accessibility tree:\n{t}")
            } else {
                let head: String = t.chars().take(TREE_CHARS).collect();
                format!(
                    "The screen's accessibility tree (its first {TREE_CHARS} of {n} characters):\n{head}"
                )
            }
        }
        _ => "(the worker sent no accessibility tree)".into(),
    }
}

/// The user message answering a message without a call (as `envs/gui` words it).
pub fn no_call(errors: u32) -> String {
    format!(
        "[TOOL_ERROR] no tool call found: call `{TOOL}` (an OpenAI tool call, or <tool_call>{{\"name\": \"{TOOL}\", \"arguments\": {{\"action\": …}}}}</tool_call>); {errors} of {MAX_PARSE_ERRORS} unreadable calls or messages so far"
    )
}

/// One tool call of a message: the id it answers, the tool's name, and its arguments or why
/// they cannot be read.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The OpenAI tool-call id, when it came as one.
    pub id: Option<String>,
    /// The tool's name as given.
    pub name: String,
    /// The arguments (a JSON object), or why they cannot be read.
    pub args: Result<Value, String>,
}

/// The tool calls of an assistant message: its OpenAI `tool_calls`, else its
/// `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks.
pub fn calls(message: &Message) -> Vec<Call> {
    if let Some(raw) = message.tool_calls_json.as_ref().into_option() {
        return match serde_json::from_str::<Value>(raw) {
            Ok(Value::Array(items)) => items
                .iter()
                .map(|item| Call {
                    id: item["id"].as_str().map(str::to_string),
                    name: item["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    args: arguments(&item["function"]["arguments"]),
                })
                .collect(),
            _ => vec![Call {
                id: None,
                name: String::new(),
                args: Err("tool_calls is not a JSON array".into()),
            }],
        };
    }
    let mut out = Vec::new();
    let mut rest = message.content.as_str();
    while let Some(at) = rest.find("<tool_call>") {
        let after = &rest[at + "<tool_call>".len()..];
        let (body, next) = match after.find("</tool_call>") {
            Some(end) => (&after[..end], &after[end + "</tool_call>".len()..]),
            None => (after, ""),
        };
        out.push(match serde_json::from_str::<Value>(body.trim()) {
            Ok(v) => Call {
                id: None,
                name: v["name"].as_str().unwrap_or_default().to_string(),
                args: arguments(&v["arguments"]),
            },
            Err(e) => Call {
                id: None,
                name: String::new(),
                args: Err(format!(
                    "json_parse_error: the tool call is not valid JSON: {e}"
                )),
            },
        });
        rest = next;
    }
    out
}

/// Arguments come as a JSON string (OpenAI) or as an object.
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

/// The call's arguments when it is a readable `computer_use` call, or why not.
pub fn readable(call: &Call) -> Result<&Value, String> {
    let args = call.args.as_ref().map_err(Clone::clone)?;
    if call.name != TOOL {
        return Err(if call.name.is_empty() {
            format!("the tool call has no name; the tool is {TOOL}")
        } else {
            format!("unknown tool `{}`; the tool is {TOOL}", call.name)
        });
    }
    Ok(args)
}

/// A grid point scaled to the screen (`round(v · (size − 1) / 999)`).
fn to_screen(v: f64, size: u32) -> i64 {
    (v * f64::from(size.saturating_sub(1)) / 999.0).round() as i64
}

/// pyautogui's name of a key name of the tool.
fn py_key(name: &str) -> String {
    let low = name.to_lowercase();
    match low.as_str() {
        "return" => "enter".into(),
        "escape" => "esc".into(),
        "control" => "ctrl".into(),
        "meta" | "cmd" | "super" => "win".into(),
        _ if name.chars().count() == 1 => name.to_string(),
        _ => low,
    }
}

/// A `computer_use` call as the pyautogui code the original's OSWorld workers run (its
/// `terminate` as `DONE` or `FAIL`, `wait` as `WAIT`), on a screen of `screen` pixels; errors
/// name what is missing.
pub fn pyautogui(args: &Value, screen: (u32, u32)) -> Result<String, String> {
    let action = args["action"]
        .as_str()
        .ok_or_else(|| format!("`{TOOL}` needs an `action`: one of {}", ACTIONS.join(", ")))?;
    let point = || -> Result<Option<(i64, i64)>, String> {
        let v = &args["coordinate"];
        if v.is_null() {
            return Ok(None);
        }
        match v
            .as_array()
            .filter(|a| a.len() == 2)
            .and_then(|a| Some((a[0].as_f64()?, a[1].as_f64()?)))
        {
            Some((x, y)) if (0.0..=999.0).contains(&x) && (0.0..=999.0).contains(&y) => {
                Ok(Some((to_screen(x, screen.0), to_screen(y, screen.1))))
            }
            _ => Err(format!(
                "`coordinate` of `{action}` must be [x, y], each from 0 to 999, got {v}"
            )),
        }
    };
    let needed = || -> Result<(i64, i64), String> {
        point()?.ok_or_else(|| {
            format!("action `{action}` needs `coordinate`: [x, y], each from 0 to 999")
        })
    };
    let py_str = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "''".into());
    let pixels = || -> Result<i64, String> {
        args["pixels"]
            .as_i64()
            .or_else(|| {
                args["pixels"]
                    .as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| f as i64)
            })
            .ok_or_else(|| format!("action `{action}` needs `pixels`: an integer"))
    };
    Ok(match action {
        "left_click" | "right_click" | "middle_click" | "double_click" | "triple_click" => {
            let f = match action {
                "left_click" => "click",
                "right_click" => "rightClick",
                "middle_click" => "middleClick",
                "double_click" => "doubleClick",
                _ => "tripleClick",
            };
            match point()? {
                Some((x, y)) => format!("pyautogui.{f}({x}, {y})"),
                None => format!("pyautogui.{f}()"),
            }
        }
        "mouse_move" => {
            let (x, y) = needed()?;
            format!("pyautogui.moveTo({x}, {y})")
        }
        "left_click_drag" => {
            let (x, y) = needed()?;
            format!("pyautogui.dragTo({x}, {y}, duration=0.3, button='left')")
        }
        "type" => {
            let text = args["text"]
                .as_str()
                .ok_or("action `type` needs `text`: a string")?;
            format!("pyautogui.write({})", py_str(text))
        }
        "key" => {
            let mut keys = Vec::new();
            for k in args["keys"]
                .as_array()
                .ok_or("action `key` needs `keys`: an array of key names")?
            {
                let k = k
                    .as_str()
                    .ok_or_else(|| format!("`keys` must hold strings, got {k}"))?;
                if k.chars().count() > 1 && k.contains('+') {
                    keys.extend(k.split('+').map(py_key));
                } else {
                    keys.push(py_key(k));
                }
            }
            let keys: Vec<String> = keys.iter().map(|k| py_str(k.as_str())).collect();
            match keys.len() {
                0 => return Err("`keys` is empty: name at least one key".into()),
                1 => format!("pyautogui.press({})", keys[0]),
                _ => format!("pyautogui.hotkey({})", keys.join(", ")),
            }
        }
        "scroll" | "hscroll" => {
            let f = if action == "scroll" {
                "scroll"
            } else {
                "hscroll"
            };
            let n = pixels()?;
            match point()? {
                Some((x, y)) => format!("pyautogui.{f}({n}, x={x}, y={y})"),
                None => format!("pyautogui.{f}({n})"),
            }
        }
        "wait" => "WAIT".into(),
        "terminate" => match args["status"].as_str() {
            Some("success") => "DONE".into(),
            Some("failure") => "FAIL".into(),
            _ => {
                return Err("action `terminate` needs `status`: \"success\" or \"failure\"".into())
            }
        },
        other => {
            return Err(format!(
                "unknown action `{other}`; the actions are {}",
                ACTIONS.join(", ")
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::abi_stable::std_types::ROption;

    #[test]
    fn calls_become_the_code_the_originals_workers_run() {
        let code = |v: Value| pyautogui(&v, (1920, 1080)).unwrap();
        assert_eq!(
            code(json!({"action": "left_click", "coordinate": [999, 0]})),
            "pyautogui.click(1919, 0)"
        );
        assert_eq!(
            code(json!({"action": "right_click"})),
            "pyautogui.rightClick()"
        );
        assert_eq!(
            code(json!({"action": "type", "text": "a \"b\"\n"})),
            "pyautogui.write(\"a \\\"b\\\"\\n\")"
        );
        assert_eq!(
            code(json!({"action": "key", "keys": ["ctrl+a"]})),
            "pyautogui.hotkey(\"ctrl\", \"a\")"
        );
        assert_eq!(
            code(json!({"action": "key", "keys": ["Return"]})),
            "pyautogui.press(\"enter\")"
        );
        assert_eq!(
            code(json!({"action": "scroll", "pixels": -5, "coordinate": [0, 999]})),
            "pyautogui.scroll(-5, x=0, y=1079)"
        );
        assert_eq!(
            code(json!({"action": "terminate", "status": "failure"})),
            "FAIL"
        );
        assert!(pyautogui(&json!({"action": "mouse_move"}), SCREEN)
            .unwrap_err()
            .contains("coordinate"));
        assert!(pyautogui(&json!({"action": "fly"}), SCREEN)
            .unwrap_err()
            .contains("unknown action"));
    }

    #[test]
    fn calls_are_read_from_tool_calls_or_the_text() {
        let mut m = Message::new("assistant", "");
        m.tool_calls_json = ROption::RSome(
            json!([{"id": "c1", "type": "function", "function": {"name": TOOL, "arguments": "{\"action\": \"wait\", \"time\": 1}"}}])
                .to_string()
                .into(),
        );
        let c = calls(&m);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].id.as_deref(), Some("c1"));
        assert_eq!(readable(&c[0]).unwrap()["action"], "wait");
        let m = Message::new(
            "assistant",
            "Action: click\n<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\"}}\n</tool_call><tool_call>{oops</tool_call>",
        );
        let c = calls(&m);
        assert_eq!(c.len(), 2);
        assert!(readable(&c[0]).is_ok());
        assert!(c[1]
            .args
            .as_ref()
            .unwrap_err()
            .starts_with("json_parse_error"));
        assert!(calls(&Message::new("assistant", "done")).is_empty());
    }
}
