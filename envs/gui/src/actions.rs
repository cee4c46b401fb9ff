//! The `computer_use` tool: its OpenAI schema, reading a call's arguments ([`parse`]), and
//! the W3C input actions each one becomes ([`plan`], [`Batch::into_actions`]).
//!
//! Coordinates are on the original's 0..999 grid in both directions; a point becomes viewport
//! pixels as `px_x = round(x · (W − 1) / 999)`, `px_y = round(y · (H − 1) / 999)` (rounded
//! half to even, as Python's `round`; the grid mapping itself never lands on a half). The
//! pointer's position is tracked per episode (it starts at 0, 0): a click without a
//! coordinate clicks where the pointer is, a drag starts there.
//!
//! What each action does, exactly as the task set's checker (`tasks/check.py`) does it:
//!
//! - `left_click`, `right_click`, `middle_click` `{coordinate?}`: one pointer sequence: a move
//!   (duration 0) to the point (or the pointer's position), then button down and up (buttons
//!   0, 2, 1). `double_click` and `triple_click`: two or three down/up pairs of button 0.
//! - `mouse_move` `{coordinate}`: the move alone.
//! - `left_click_drag` `{coordinate}`: a move to the pointer's position, button 0 down, ten
//!   moves of 30 ms each to `start + (end − start) · i / 10` (i = 1..10, rounded half to
//!   even), button 0 up.
//! - `type` `{text}`: key down and up for each character, in one call of its own.
//! - `key` `{keys}`: every key down in order, then up in reverse order. Names (any case):
//!   enter/return, tab, backspace, delete, escape/esc, space (a plain space), up, down, left,
//!   right, home, end, pageup, pagedown, ctrl/control, shift, alt, meta/cmd/super, f1..f12, or
//!   one character as itself; `"ctrl+a"` is read as `["ctrl", "a"]`.
//! - `scroll` `{coordinate?, pixels}`: one wheel scroll at the point (or the pointer's
//!   position), `deltaY = −pixels · 100` (positive `pixels` scroll up); `hscroll`:
//!   `deltaX = pixels · 100` (positive right). The pointer is then taken to be at that point.
//! - `wait` `{time}`: sleeps `min(time, 10)` seconds.
//! - `terminate` `{status}`: `success` or `failure`; ends the episode.

use std::time::Duration;

use fantoccini::actions::{
    Actions, InputSource, KeyAction, KeyActions, MouseActions, PointerAction, WheelAction,
    WheelActions, MOUSE_BUTTON_LEFT, MOUSE_BUTTON_MIDDLE, MOUSE_BUTTON_RIGHT,
};
use fantoccini::key::Key;
use openclaw_plugin_api::abi_stable::std_types::ROption::RSome;
use openclaw_plugin_api::serde_json::{json, Value};
use openclaw_plugin_api::{Action, Message};

/// The tool's name.
pub const TOOL: &str = "computer_use";

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

/// The largest grid coordinate.
pub const GRID_MAX: f64 = 999.0;
/// The longest `wait`, seconds.
pub const WAIT_MAX_SECONDS: f64 = 10.0;
/// The moves of a drag.
pub const DRAG_STEPS: i64 = 10;
/// The duration of each move of a drag, ms (300 ms in all).
pub const DRAG_STEP_MS: u64 = 30;
/// Wheel delta per unit of `pixels`.
pub const SCROLL_UNIT: i64 = 100;

/// The tool's OpenAI schema (a `tools` array of one function), as text in the key order
/// OpenAI's documentation and Qwen's templates use.
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
    // serde_json's map keeps keys sorted unless its `preserve_order` feature is on; the
    // order is cosmetic, the content is what the model sees.
    format!("[{tool}]")
}

/// A point on the 0..999 grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridPoint {
    /// From the left edge.
    pub x: f64,
    /// From the top edge.
    pub y: f64,
}

/// The page's viewport, CSS pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewport {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

impl Viewport {
    /// The grid point in viewport pixels.
    pub fn to_px(&self, p: GridPoint) -> (i64, i64) {
        (scale(p.x, self.width), scale(p.y, self.height))
    }
}

/// `round(v · (size − 1) / 999)`, half to even.
fn scale(v: f64, size: u32) -> i64 {
    (v * f64::from(size.saturating_sub(1)) / GRID_MAX).round_ties_even() as i64
}

/// One action, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Act {
    /// Keys pressed together: their names as given, and the WebDriver key values.
    Key {
        /// The names.
        names: Vec<String>,
        /// Their values, in order.
        values: Vec<char>,
    },
    /// Text typed character by character.
    Type(String),
    /// A pointer move.
    MouseMove(GridPoint),
    /// A click of `button`, `count` times, at a point or where the pointer is.
    Click {
        /// The action's name.
        name: &'static str,
        /// WebDriver's button number (0 left, 1 middle, 2 right).
        button: u64,
        /// 1, 2 or 3.
        count: u32,
        /// Where, when given.
        at: Option<GridPoint>,
    },
    /// A left-button drag from the pointer's position to a point.
    Drag(GridPoint),
    /// A wheel scroll.
    Scroll {
        /// Where, when given.
        at: Option<GridPoint>,
        /// The amount (positive up, or right for `hscroll`).
        pixels: i64,
        /// `hscroll`.
        horizontal: bool,
    },
    /// A pause, seconds (already cut to [`WAIT_MAX_SECONDS`]).
    Wait(f64),
    /// The end of the episode, with the agent's status.
    Terminate {
        /// `success` (or `failure`).
        success: bool,
    },
}

/// Reads a `computer_use` call's arguments; errors name what is missing or wrong.
pub fn parse(args: &Value) -> Result<Act, String> {
    let action = match args.get("action") {
        Some(Value::String(a)) => a.as_str(),
        Some(other) => return Err(format!("`action` must be a string, got {other}")),
        None => {
            return Err(format!(
                "`{TOOL}` needs an `action`: one of {}",
                ACTIONS.join(", ")
            ))
        }
    };
    Ok(match action {
        "key" => {
            let list = args.get("keys").and_then(Value::as_array).ok_or_else(|| {
                "action `key` needs `keys`: an array of key names, e.g. [\"ctrl\", \"a\"]"
                    .to_string()
            })?;
            let mut names = Vec::new();
            for k in list {
                let k = k
                    .as_str()
                    .ok_or_else(|| format!("`keys` must hold strings, got {k}"))?;
                if key_value(k).is_none() && k.chars().count() > 1 && k.contains('+') {
                    names.extend(k.split('+').map(str::to_string));
                } else {
                    names.push(k.to_string());
                }
            }
            if names.is_empty() {
                return Err("`keys` is empty: name at least one key".into());
            }
            let values = names
                .iter()
                .map(|n| {
                    key_value(n).ok_or_else(|| {
                        format!(
                            "unknown key `{n}` in `keys`; the names are {}, f1..f12, or one character",
                            KEY_NAMES.join(", ")
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Act::Key { names, values }
        }
        "type" => {
            let text = args
                .get("text")
                .and_then(Value::as_str)
                .ok_or("action `type` needs `text`: a string")?;
            // Each character is two WebDriver key actions.
            if text.chars().count() > 10_000 {
                return Err("`text` is longer than 10,000 characters".into());
            }
            Act::Type(text.to_string())
        }
        "mouse_move" => {
            Act::MouseMove(coordinate(args, action)?.ok_or_else(|| need_coordinate(action))?)
        }
        "left_click_drag" => {
            Act::Drag(coordinate(args, action)?.ok_or_else(|| need_coordinate(action))?)
        }
        "left_click" | "right_click" | "middle_click" | "double_click" | "triple_click" => {
            let (name, button, count) = match action {
                "left_click" => ("left_click", MOUSE_BUTTON_LEFT, 1),
                "right_click" => ("right_click", MOUSE_BUTTON_RIGHT, 1),
                "middle_click" => ("middle_click", MOUSE_BUTTON_MIDDLE, 1),
                "double_click" => ("double_click", MOUSE_BUTTON_LEFT, 2),
                _ => ("triple_click", MOUSE_BUTTON_LEFT, 3),
            };
            Act::Click {
                name,
                button,
                count,
                at: coordinate(args, action)?,
            }
        }
        "scroll" | "hscroll" => {
            let pixels = match args.get("pixels") {
                Some(v) => v
                    .as_i64()
                    .or_else(|| v.as_f64().filter(|f| f.is_finite() && f.abs() < 1e9).map(|f| f.trunc() as i64))
                    .ok_or_else(|| format!("`pixels` must be an integer, got {v}"))?,
                None => {
                    return Err(format!(
                        "action `{action}` needs `pixels`: an integer (for `scroll`, positive up; for `hscroll`, positive right)"
                    ))
                }
            };
            if pixels.abs() > 1_000_000 {
                return Err(format!("`pixels` = {pixels} is too large"));
            }
            Act::Scroll {
                at: coordinate(args, action)?,
                pixels,
                horizontal: action == "hscroll",
            }
        }
        "wait" => {
            let t = args
                .get("time")
                .ok_or("action `wait` needs `time`: the seconds to wait")?;
            let t = t
                .as_f64()
                .filter(|t| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| format!("`time` must be a number of seconds >= 0, got {t}"))?;
            Act::Wait(t.min(WAIT_MAX_SECONDS))
        }
        "terminate" => match args.get("status").and_then(Value::as_str) {
            Some("success") => Act::Terminate { success: true },
            Some("failure") => Act::Terminate { success: false },
            _ => {
                return Err(format!(
                    "action `terminate` needs `status`: \"success\" or \"failure\", got {}",
                    args.get("status")
                        .map_or("nothing".to_string(), Value::to_string)
                ))
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

fn need_coordinate(action: &str) -> String {
    format!("action `{action}` needs `coordinate`: [x, y], each from 0 to 999")
}

/// The `coordinate` argument, when given: `[x, y]`, numbers from 0 to 999.
fn coordinate(args: &Value, action: &str) -> Result<Option<GridPoint>, String> {
    let Some(v) = args.get("coordinate").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let xy = v
        .as_array()
        .filter(|a| a.len() == 2)
        .and_then(|a| Some((a[0].as_f64()?, a[1].as_f64()?)));
    match xy {
        Some((x, y)) if (0.0..=GRID_MAX).contains(&x) && (0.0..=GRID_MAX).contains(&y) => {
            Ok(Some(GridPoint { x, y }))
        }
        Some(_) => Err(format!(
            "`coordinate` {v} of `{action}` is outside the grid: x and y go from 0 to 999"
        )),
        None => Err(format!(
            "`coordinate` of `{action}` must be [x, y] (two numbers from 0 to 999), got {v}"
        )),
    }
}

/// The named keys, as the error lists them.
const KEY_NAMES: [&str; 24] = [
    "enter",
    "return",
    "tab",
    "backspace",
    "delete",
    "insert",
    "escape",
    "esc",
    "space",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
    "ctrl",
    "control",
    "shift",
    "alt",
    "meta",
    "cmd",
    "super",
];

/// The WebDriver key value of a key name (any case), or of one character (itself).
pub fn key_value(name: &str) -> Option<char> {
    let low = name.to_lowercase();
    let key = match low.as_str() {
        "enter" | "return" => Key::Enter,
        "tab" => Key::Tab,
        "backspace" => Key::Backspace,
        "delete" => Key::Delete,
        "insert" => Key::Insert,
        "escape" | "esc" => Key::Escape,
        // A plain space, as the checker sends it (not WebDriver's Space key code).
        "space" => return Some(' '),
        "up" => Key::Up,
        "down" => Key::Down,
        "left" => Key::Left,
        "right" => Key::Right,
        "home" => Key::Home,
        "end" => Key::End,
        "pageup" => Key::PageUp,
        "pagedown" => Key::PageDown,
        "ctrl" | "control" => Key::Control,
        "shift" => Key::Shift,
        "alt" => Key::Alt,
        "meta" | "cmd" | "super" => Key::Meta,
        "f1" => Key::F1,
        "f2" => Key::F2,
        "f3" => Key::F3,
        "f4" => Key::F4,
        "f5" => Key::F5,
        "f6" => Key::F6,
        "f7" => Key::F7,
        "f8" => Key::F8,
        "f9" => Key::F9,
        "f10" => Key::F10,
        "f11" => Key::F11,
        "f12" => Key::F12,
        _ => {
            let mut chars = name.chars();
            return match (chars.next(), chars.next()) {
                (Some(c), None) => Some(c),
                _ => None,
            };
        }
    };
    Some(char::from(key))
}

/// One step of a pointer sequence, in viewport pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointerStep {
    /// A move to a point, over `ms` milliseconds.
    Move {
        /// x.
        x: i64,
        /// y.
        y: i64,
        /// Duration.
        ms: u64,
    },
    /// Button down.
    Down(u64),
    /// Button up.
    Up(u64),
}

/// One `perform_actions` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Batch {
    /// A mouse sequence.
    Pointer(Vec<PointerStep>),
    /// A keyboard sequence: (down?, key value).
    Keys(Vec<(bool, char)>),
    /// One wheel scroll at a point, with its deltas.
    Wheel {
        /// x.
        x: i64,
        /// y.
        y: i64,
        /// Horizontal delta (positive right).
        dx: i64,
        /// Vertical delta (positive down).
        dy: i64,
    },
}

/// What an action does: at most one batch of input, then a pause.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The input, if any.
    pub batch: Option<Batch>,
    /// The pointer's position afterwards, pixels.
    pub pointer: (i64, i64),
    /// How long to wait afterwards (`wait`).
    pub sleep: Duration,
    /// How many settle periods the page gets afterwards (3 after a scroll, 0 for
    /// `terminate`, else 1), as the checker waits.
    pub settle: u32,
    /// `terminate`'s status.
    pub terminate: Option<bool>,
    /// What the agent is told was done.
    pub summary: String,
}

/// A grid coordinate as written back to the agent.
fn show(p: GridPoint) -> String {
    let n = |v: f64| {
        if v.fract() == 0.0 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        }
    };
    format!("[{}, {}]", n(p.x), n(p.y))
}

/// The input `act` becomes in `viewport`, with the pointer at `pointer` (pixels).
pub fn plan(act: &Act, viewport: Viewport, pointer: (i64, i64)) -> Plan {
    let mut p = Plan {
        batch: None,
        pointer,
        sleep: Duration::ZERO,
        settle: 1,
        terminate: None,
        summary: String::new(),
    };
    match act {
        Act::Key { names, values } => {
            let mut keys: Vec<(bool, char)> = values.iter().map(|&v| (true, v)).collect();
            keys.extend(values.iter().rev().map(|&v| (false, v)));
            p.batch = Some(Batch::Keys(keys));
            p.summary = format!("pressed {}", names.join("+"));
        }
        Act::Type(text) => {
            let keys = text.chars().flat_map(|c| [(true, c), (false, c)]).collect();
            p.batch = Some(Batch::Keys(keys));
            p.summary = format!("typed {} characters", text.chars().count());
        }
        Act::MouseMove(at) => {
            let (x, y) = viewport.to_px(*at);
            p.batch = Some(Batch::Pointer(vec![PointerStep::Move { x, y, ms: 0 }]));
            p.pointer = (x, y);
            p.summary = format!("moved the mouse to {}", show(*at));
        }
        Act::Click {
            name,
            button,
            count,
            at,
        } => {
            let (x, y) = at.map_or(pointer, |a| viewport.to_px(a));
            let mut steps = vec![PointerStep::Move { x, y, ms: 0 }];
            for _ in 0..*count {
                steps.push(PointerStep::Down(*button));
                steps.push(PointerStep::Up(*button));
            }
            p.batch = Some(Batch::Pointer(steps));
            p.pointer = (x, y);
            p.summary = match at {
                Some(a) => format!("{name} at {}", show(*a)),
                None => format!("{name} where the mouse was"),
            };
        }
        Act::Drag(to) => {
            let (sx, sy) = pointer;
            let (ex, ey) = viewport.to_px(*to);
            let mut steps = vec![
                PointerStep::Move {
                    x: sx,
                    y: sy,
                    ms: 0,
                },
                PointerStep::Down(MOUSE_BUTTON_LEFT),
            ];
            for i in 1..=DRAG_STEPS {
                // start + (end − start) · i / 10, as the checker computes it.
                let x = sx as f64 + ((ex - sx) * i) as f64 / DRAG_STEPS as f64;
                let y = sy as f64 + ((ey - sy) * i) as f64 / DRAG_STEPS as f64;
                steps.push(PointerStep::Move {
                    x: x.round_ties_even() as i64,
                    y: y.round_ties_even() as i64,
                    ms: DRAG_STEP_MS,
                });
            }
            steps.push(PointerStep::Up(MOUSE_BUTTON_LEFT));
            p.batch = Some(Batch::Pointer(steps));
            p.pointer = (ex, ey);
            p.summary = format!("dragged to {}", show(*to));
        }
        Act::Scroll {
            at,
            pixels,
            horizontal,
        } => {
            let (x, y) = at.map_or(pointer, |a| viewport.to_px(a));
            let (dx, dy) = if *horizontal {
                (pixels * SCROLL_UNIT, 0)
            } else {
                (0, -pixels * SCROLL_UNIT)
            };
            p.batch = Some(Batch::Wheel { x, y, dx, dy });
            p.pointer = (x, y);
            p.settle = 3;
            let way = match (*horizontal, *pixels >= 0) {
                (false, true) => "up",
                (false, false) => "down",
                (true, true) => "right",
                (true, false) => "left",
            };
            p.summary = format!("scrolled {way} by {}", pixels.abs());
        }
        Act::Wait(t) => {
            p.sleep = Duration::from_secs_f64(*t);
            p.summary = format!("waited {t} s");
        }
        Act::Terminate { success } => {
            p.terminate = Some(*success);
            p.settle = 0;
            p.summary = format!(
                "terminated: {}",
                if *success { "success" } else { "failure" }
            );
        }
    }
    p
}

impl Batch {
    /// The WebDriver actions (input source ids `mouse`, `keyboard` and `wheel`, the same
    /// across an episode).
    pub fn into_actions(self) -> Actions {
        match self {
            Batch::Pointer(steps) => {
                let mut m = MouseActions::new("mouse".to_string());
                for s in steps {
                    m = m.then(match s {
                        PointerStep::Move { x, y, ms } => PointerAction::MoveTo {
                            duration: Some(Duration::from_millis(ms)),
                            x: x as f64,
                            y: y as f64,
                        },
                        PointerStep::Down(button) => PointerAction::Down { button },
                        PointerStep::Up(button) => PointerAction::Up { button },
                    });
                }
                Actions::from(m)
            }
            Batch::Keys(keys) => {
                let mut k = KeyActions::new("keyboard".to_string());
                for (down, value) in keys {
                    k = k.then(if down {
                        KeyAction::Down { value }
                    } else {
                        KeyAction::Up { value }
                    });
                }
                Actions::from(k)
            }
            Batch::Wheel { x, y, dx, dy } => {
                let w = WheelActions::new("wheel".to_string()).then(WheelAction::Scroll {
                    duration: Some(Duration::ZERO),
                    x,
                    y,
                    delta_x: dx,
                    delta_y: dy,
                });
                Actions::from(w)
            }
        }
    }
}

/// An assistant message making one `computer_use` call with `args` (OpenAI `tool_calls`, id
/// `id`): how a scripted policy (`solution.json`, `wrong.json`, the tests) acts.
pub fn call_message(args: &Value, id: &str) -> Action {
    let mut m = Message::new("assistant", "");
    let calls = json!([{
        "id": id,
        "type": "function",
        "function": {"name": TOOL, "arguments": args.to_string()},
    }]);
    m.tool_calls_json = RSome(calls.to_string().into());
    Action { message: m }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::serde_json;

    const VP: Viewport = Viewport {
        width: 1000,
        height: 800,
    };

    fn pt(x: f64, y: f64) -> GridPoint {
        GridPoint { x, y }
    }

    #[test]
    fn the_grid_scales_to_the_viewport() {
        assert_eq!(VP.to_px(pt(0.0, 0.0)), (0, 0));
        assert_eq!(VP.to_px(pt(999.0, 999.0)), (999, 799));
        // 500 · 799 / 999 = 399.9
        assert_eq!(VP.to_px(pt(500.0, 500.0)), (500, 400));
        // 1 · 799 / 999 = 0.7998; 998 · 799 / 999 = 798.2
        assert_eq!(VP.to_px(pt(1.0, 1.0)), (1, 1));
        assert_eq!(VP.to_px(pt(998.0, 998.0)), (998, 798));
        let small = Viewport {
            width: 640,
            height: 480,
        };
        // 250 · 639 / 999 = 159.9; 750 · 479 / 999 = 359.6
        assert_eq!(small.to_px(pt(250.0, 750.0)), (160, 360));
    }

    #[test]
    fn actions_are_read_and_bad_arguments_are_named() {
        assert_eq!(
            parse(&json!({"action": "left_click", "coordinate": [10, 20]})).unwrap(),
            Act::Click {
                name: "left_click",
                button: 0,
                count: 1,
                at: Some(pt(10.0, 20.0))
            }
        );
        assert!(matches!(
            parse(&json!({"action": "right_click"})).unwrap(),
            Act::Click {
                button: 2,
                at: None,
                ..
            }
        ));
        assert!(matches!(
            parse(&json!({"action": "middle_click"})).unwrap(),
            Act::Click {
                button: 1,
                count: 1,
                ..
            }
        ));
        assert!(matches!(
            parse(&json!({"action": "triple_click", "coordinate": [1, 1]})).unwrap(),
            Act::Click {
                button: 0,
                count: 3,
                ..
            }
        ));
        assert_eq!(
            parse(&json!({"action": "wait", "time": 30})).unwrap(),
            Act::Wait(10.0)
        );
        assert_eq!(
            parse(&json!({"action": "terminate", "status": "failure"})).unwrap(),
            Act::Terminate { success: false }
        );
        assert_eq!(
            parse(&json!({"action": "scroll", "pixels": -3})).unwrap(),
            Act::Scroll {
                at: None,
                pixels: -3,
                horizontal: false
            }
        );
        let err = |v: Value| parse(&v).unwrap_err();
        assert!(err(json!({"action": "fly"})).contains("unknown action `fly`"));
        assert!(err(json!({})).contains("needs an `action`"));
        assert!(err(json!({"action": "mouse_move"})).contains("needs `coordinate`"));
        assert!(err(json!({"action": "left_click_drag"})).contains("needs `coordinate`"));
        assert!(
            err(json!({"action": "left_click", "coordinate": [1000, 5]}))
                .contains("outside the grid")
        );
        assert!(err(json!({"action": "left_click", "coordinate": [-1, 5]}))
            .contains("outside the grid"));
        assert!(
            err(json!({"action": "left_click", "coordinate": "500,300"}))
                .contains("must be [x, y]")
        );
        assert!(
            err(json!({"action": "left_click", "coordinate": [1, 2, 3]}))
                .contains("must be [x, y]")
        );
        assert!(err(json!({"action": "type"})).contains("needs `text`"));
        assert!(err(json!({"action": "type", "text": 5})).contains("needs `text`"));
        assert!(err(json!({"action": "key", "keys": "enter"})).contains("needs `keys`"));
        assert!(err(json!({"action": "key", "keys": []})).contains("empty"));
        assert!(err(json!({"action": "key", "keys": ["hyper"]})).contains("unknown key `hyper`"));
        assert!(err(json!({"action": "scroll"})).contains("needs `pixels`"));
        assert!(err(json!({"action": "hscroll", "pixels": "2"})).contains("must be an integer"));
        assert!(err(json!({"action": "wait"})).contains("needs `time`"));
        assert!(err(json!({"action": "wait", "time": -1})).contains(">= 0"));
        assert!(err(json!({"action": "terminate"})).contains("needs `status`"));
        assert!(err(json!({"action": "terminate", "status": "done"})).contains("\"done\""));
    }

    #[test]
    fn key_names_become_webdriver_key_values() {
        assert_eq!(key_value("Enter"), Some('\u{e007}'));
        assert_eq!(key_value("return"), Some('\u{e007}'));
        assert_eq!(key_value("TAB"), Some('\u{e004}'));
        assert_eq!(key_value("backspace"), Some('\u{e003}'));
        assert_eq!(key_value("delete"), Some('\u{e017}'));
        assert_eq!(key_value("esc"), Some('\u{e00c}'));
        assert_eq!(key_value("space"), Some(' '));
        assert_eq!(key_value("up"), Some('\u{e013}'));
        assert_eq!(key_value("down"), Some('\u{e015}'));
        assert_eq!(key_value("left"), Some('\u{e012}'));
        assert_eq!(key_value("right"), Some('\u{e014}'));
        assert_eq!(key_value("home"), Some('\u{e011}'));
        assert_eq!(key_value("end"), Some('\u{e010}'));
        assert_eq!(key_value("pageup"), Some('\u{e00e}'));
        assert_eq!(key_value("pagedown"), Some('\u{e00f}'));
        assert_eq!(key_value("ctrl"), Some('\u{e009}'));
        assert_eq!(key_value("Control"), Some('\u{e009}'));
        assert_eq!(key_value("shift"), Some('\u{e008}'));
        assert_eq!(key_value("alt"), Some('\u{e00a}'));
        for meta in ["meta", "cmd", "super"] {
            assert_eq!(key_value(meta), Some('\u{e03d}'));
        }
        assert_eq!(key_value("f1"), Some('\u{e031}'));
        assert_eq!(key_value("F12"), Some('\u{e03c}'));
        assert_eq!(key_value("a"), Some('a'));
        assert_eq!(key_value("A"), Some('A'));
        assert_eq!(key_value("é"), Some('é'));
        assert_eq!(key_value("ab"), None);
        assert_eq!(key_value(""), None);
        let Act::Key { names, values } =
            parse(&json!({"action": "key", "keys": ["ctrl+a"]})).unwrap()
        else {
            panic!()
        };
        assert_eq!(names, ["ctrl", "a"]);
        assert_eq!(values, ['\u{e009}', 'a']);
        assert_eq!(
            plan(&Act::Key { names, values }, VP, (0, 0)).batch,
            Some(Batch::Keys(vec![
                (true, '\u{e009}'),
                (true, 'a'),
                (false, 'a'),
                (false, '\u{e009}')
            ]))
        );
    }

    #[test]
    fn plans_follow_the_checkers_sequences() {
        use PointerStep::{Down, Move, Up};
        let click = parse(&json!({"action": "double_click", "coordinate": [500, 500]})).unwrap();
        let p = plan(&click, VP, (3, 4));
        assert_eq!(
            p.batch,
            Some(Batch::Pointer(vec![
                Move {
                    x: 500,
                    y: 400,
                    ms: 0
                },
                Down(0),
                Up(0),
                Down(0),
                Up(0)
            ]))
        );
        assert_eq!(p.pointer, (500, 400));
        // Without a coordinate: where the pointer is.
        let p = plan(
            &parse(&json!({"action": "right_click"})).unwrap(),
            VP,
            (7, 9),
        );
        assert_eq!(
            p.batch,
            Some(Batch::Pointer(vec![
                Move { x: 7, y: 9, ms: 0 },
                Down(2),
                Up(2)
            ]))
        );
        // A drag from the pointer, ten 30 ms moves rounded half to even: 0.5 → 0, 1.5 → 2.
        let drag = Act::Drag(pt(5.0, 0.0));
        let p = plan(&drag, VP, (0, 0));
        let Some(Batch::Pointer(steps)) = &p.batch else {
            panic!()
        };
        assert_eq!(steps.len(), 13);
        assert_eq!(steps[0], Move { x: 0, y: 0, ms: 0 });
        assert_eq!(steps[1], Down(0));
        assert_eq!(steps[2], Move { x: 0, y: 0, ms: 30 });
        assert_eq!(steps[4], Move { x: 2, y: 0, ms: 30 });
        assert_eq!(steps[11], Move { x: 5, y: 0, ms: 30 });
        assert_eq!(steps[12], Up(0));
        assert_eq!(p.pointer, (5, 0));
        // Scrolls: positive `pixels` up (negative deltaY); hscroll positive right.
        let p = plan(
            &parse(&json!({"action": "scroll", "pixels": 3, "coordinate": [0, 999]})).unwrap(),
            VP,
            (1, 1),
        );
        assert_eq!(
            p.batch,
            Some(Batch::Wheel {
                x: 0,
                y: 799,
                dx: 0,
                dy: -300
            })
        );
        assert_eq!((p.pointer, p.settle), ((0, 799), 3));
        let p = plan(
            &parse(&json!({"action": "hscroll", "pixels": -2})).unwrap(),
            VP,
            (10, 20),
        );
        assert_eq!(
            p.batch,
            Some(Batch::Wheel {
                x: 10,
                y: 20,
                dx: -200,
                dy: 0
            })
        );
        // Typing: down and up per character.
        let p = plan(&Act::Type("hé".into()), VP, (0, 0));
        assert_eq!(
            p.batch,
            Some(Batch::Keys(vec![
                (true, 'h'),
                (false, 'h'),
                (true, 'é'),
                (false, 'é')
            ]))
        );
        let p = plan(&Act::Wait(1.5), VP, (2, 2));
        assert_eq!(
            (p.batch, p.sleep, p.pointer),
            (None, Duration::from_millis(1500), (2, 2))
        );
        let p = plan(&Act::Terminate { success: true }, VP, (0, 0));
        assert_eq!((p.terminate, p.settle), (Some(true), 0));
    }

    #[test]
    fn the_schema_offers_every_action() {
        let v: Value = serde_json::from_str(&schema()).unwrap();
        let f = &v[0]["function"];
        assert_eq!(f["name"], TOOL);
        let listed: Vec<&str> = f["parameters"]["properties"]["action"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(listed, ACTIONS);
        for a in ACTIONS {
            assert!(
                f["parameters"]["properties"]["action"]["description"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("`{a}`")),
                "{a}"
            );
        }
        let m = call_message(&json!({"action": "wait", "time": 1}), "c1");
        let calls = openclaw_env_kit::tool_calls(&m.message);
        assert_eq!(calls[0].name, TOOL);
        assert_eq!(calls[0].args.as_ref().unwrap()["time"], 1);
    }
}
