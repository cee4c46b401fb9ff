//! The page's accessibility tree as text: what `Accessibility.getFullAXTree` (Chrome DevTools
//! Protocol, through chromedriver's `goog/cdp/execute`) returns, one line per node the agent
//! can use, indented two spaces per level:
//!
//! ```text
//! RootWebArea "Sign up" focused
//!   heading "Sign up" level=1 @[80, 40]
//!   textbox "Email" value="a@b.c" focused @[120, 95]
//!   checkbox "Subscribe" checked @[310, 95]
//!   button "Send" disabled (below the screen)
//! ```
//!
//! A line is `role "name"` (the name left out when empty), the node's states (`value=…`,
//! `checked` / `unchecked` / `checked=mixed`, `pressed`, `selected`, `expanded` /
//! `collapsed`, `disabled`, `focused`, `required`, `level=N`) and where it is: the center of
//! its box on the 0..999 grid the actions use (`@[x, y]`), or which way it lies when it is out
//! of the viewport. The boxes come from `DOMSnapshot.captureSnapshot` ([`Layout`]); without
//! them the lines have no place. Left out (their children move up a level): ignored nodes,
//! nameless `generic`/`none`/`LabelText` containers, `InlineTextBox` nodes and text that only
//! repeats its parent's name or value. The text is cut to a number of characters at a line's
//! end, with a note of the lines left out.

use std::collections::{HashMap, HashSet};

use openclaw_plugin_api::serde_json::Value;

use crate::actions::{Viewport, GRID_MAX};

/// Characters of a name kept on its line.
const NAME_CHARS: usize = 160;
/// Deeper levels are indented as this one.
const MAX_INDENT: usize = 24;

/// Containers that are left out when they have no name.
const PASS_THROUGH: [&str; 8] = [
    "generic",
    "none",
    "presentation",
    "GenericContainer",
    "LabelText",
    "LineBreak",
    "IframePresentational",
    "Ignored",
];

/// Where the page's nodes are: the center of each laid-out node's box in viewport pixels, by
/// its backend DOM node id, from `DOMSnapshot.captureSnapshot` (whose boxes are in document
/// coordinates: the document's scroll offset is taken off).
#[derive(Clone, Debug)]
pub struct Layout {
    centers: HashMap<i64, (f64, f64)>,
    viewport: Viewport,
}

impl Layout {
    /// No boxes (lines without places).
    pub fn none(viewport: Viewport) -> Layout {
        Layout {
            centers: HashMap::new(),
            viewport,
        }
    }

    /// The boxes of the snapshot's main document.
    pub fn from_snapshot(snapshot: &Value, viewport: Viewport) -> Layout {
        let mut out = Layout::none(viewport);
        let doc = &snapshot["documents"][0];
        let (Some(ids), Some(index), Some(bounds)) = (
            doc["nodes"]["backendNodeId"].as_array(),
            doc["layout"]["nodeIndex"].as_array(),
            doc["layout"]["bounds"].as_array(),
        ) else {
            return out;
        };
        let sx = doc["scrollOffsetX"].as_f64().unwrap_or(0.0);
        let sy = doc["scrollOffsetY"].as_f64().unwrap_or(0.0);
        for (i, b) in index.iter().zip(bounds) {
            let Some(id) = i
                .as_u64()
                .and_then(|i| ids.get(i as usize))
                .and_then(Value::as_i64)
            else {
                continue;
            };
            let r: Vec<f64> = b
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            if r.len() != 4 || r[2] <= 0.0 || r[3] <= 0.0 {
                continue;
            }
            out.centers
                .entry(id)
                .or_insert((r[0] + r[2] / 2.0 - sx, r[1] + r[3] / 2.0 - sy));
        }
        out
    }

    /// Where node `backend` is, as a line shows it: `@[x, y]` on the grid when its center is
    /// in the viewport, else which way it lies.
    pub fn place(&self, backend: i64) -> Option<String> {
        let &(x, y) = self.centers.get(&backend)?;
        let (w, h) = (
            f64::from(self.viewport.width),
            f64::from(self.viewport.height),
        );
        Some(if y < 0.0 {
            "(above the screen)".into()
        } else if y >= h {
            "(below the screen)".into()
        } else if x < 0.0 {
            "(left of the screen)".into()
        } else if x >= w {
            "(right of the screen)".into()
        } else {
            let grid = |v: f64, size: f64| {
                (v * GRID_MAX / (size - 1.0).max(1.0))
                    .round()
                    .clamp(0.0, GRID_MAX) as i64
            };
            format!("@[{}, {}]", grid(x, w), grid(y, h))
        })
    }
}

fn str_value(v: &Value) -> Option<&str> {
    v.get("value").and_then(Value::as_str)
}

/// The name and value of a node, as its line shows them.
fn name_and_value(node: &Value) -> (String, String) {
    let value = match &node["value"]["value"] {
        Value::String(s) => clean(s),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    };
    (clean(str_value(&node["name"]).unwrap_or("")), value)
}

/// One node's line (without indentation), or `None` when it is left out. `parent` is the name
/// and value of the nearest printed ancestor.
fn line(node: &Value, parent: &(String, String), layout: &Layout) -> Option<String> {
    if node["ignored"].as_bool() == Some(true) {
        return None;
    }
    let role = str_value(&node["role"]).unwrap_or("");
    let (name, value) = name_and_value(node);
    if role == "InlineTextBox" {
        return None;
    }
    if role == "StaticText" && (name.is_empty() || name == parent.0 || name == parent.1) {
        return None;
    }
    let mut states = Vec::new();
    match &node["value"]["value"] {
        Value::String(_) if !value.is_empty() => states.push(format!("value={}", quote(&value))),
        Value::Number(_) => states.push(format!("value={value}")),
        _ => {}
    }
    if let Some(props) = node["properties"].as_array() {
        for p in props {
            let v = &p["value"]["value"];
            let truthy = v.as_bool() == Some(true) || v.as_str() == Some("true");
            match p["name"].as_str().unwrap_or("") {
                "checked" => states.push(
                    match v
                        .as_str()
                        .map(str::to_string)
                        .or(v.as_bool().map(|b| b.to_string()))
                    {
                        Some(s) if s == "true" => "checked".into(),
                        Some(s) if s == "mixed" => "checked=mixed".into(),
                        _ => "unchecked".into(),
                    },
                ),
                "pressed" if truthy => states.push("pressed".into()),
                "pressed" if v.as_str() == Some("mixed") => states.push("pressed=mixed".into()),
                "selected" if truthy => states.push("selected".into()),
                "expanded" => states.push(if truthy { "expanded" } else { "collapsed" }.into()),
                "disabled" if truthy => states.push("disabled".into()),
                "focused" if truthy => states.push("focused".into()),
                "required" if truthy => states.push("required".into()),
                "level" => {
                    if let Some(n) = v.as_i64() {
                        states.push(format!("level={n}"));
                    }
                }
                _ => {}
            }
        }
    }
    if name.is_empty() && states.is_empty() && (role.is_empty() || PASS_THROUGH.contains(&role)) {
        return None;
    }
    let mut out = if role.is_empty() {
        "node".to_string()
    } else {
        role.to_string()
    };
    if !name.is_empty() {
        out.push(' ');
        out.push_str(&quote(&name));
    }
    for s in states {
        out.push(' ');
        out.push_str(&s);
    }
    if role != "RootWebArea" {
        if let Some(place) = node["backendDOMNodeId"]
            .as_i64()
            .and_then(|id| layout.place(id))
        {
            out.push(' ');
            out.push_str(&place);
        }
    }
    Some(out)
}

/// Whitespace runs as one space, trimmed, cut to [`NAME_CHARS`].
fn clean(s: &str) -> String {
    let joined = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if joined.chars().count() <= NAME_CHARS {
        joined
    } else {
        let mut cut: String = joined.chars().take(NAME_CHARS).collect();
        cut.push('…');
        cut
    }
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The tree's lines, in document order.
pub fn lines(tree: &Value, layout: &Layout) -> Vec<String> {
    let empty = Vec::new();
    let nodes = tree["nodes"].as_array().unwrap_or(&empty);
    let by_id: HashMap<&str, &Value> = nodes
        .iter()
        .filter_map(|n| Some((n["nodeId"].as_str()?, n)))
        .collect();
    let roots: Vec<&Value> = nodes
        .iter()
        .filter(|n| {
            n["parentId"]
                .as_str()
                .is_none_or(|p| !by_id.contains_key(p))
        })
        .collect();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    // Depth-first, children in their order: (node, depth, the printed ancestor's name and
    // value).
    let mut stack: Vec<(&Value, usize, (String, String))> = roots
        .into_iter()
        .rev()
        .map(|n| (n, 0, (String::new(), String::new())))
        .collect();
    while let Some((node, depth, parent)) = stack.pop() {
        let id = node["nodeId"].as_str().unwrap_or("");
        if !id.is_empty() && !seen.insert(id) {
            continue;
        }
        let (child_depth, child_parent) = match line(node, &parent, layout) {
            Some(l) => {
                out.push(format!("{}{l}", "  ".repeat(depth.min(MAX_INDENT))));
                (depth + 1, name_and_value(node))
            }
            None => (depth, parent),
        };
        if let Some(children) = node["childIds"].as_array() {
            for c in children.iter().rev() {
                if let Some(child) = c.as_str().and_then(|c| by_id.get(c)) {
                    stack.push((child, child_depth, child_parent.clone()));
                }
            }
        }
    }
    out
}

/// The tree as text of at most `limit` characters (whole lines, then a note of how many were
/// left out).
pub fn text(tree: &Value, layout: &Layout, limit: usize) -> String {
    let lines = lines(tree, layout);
    if lines.is_empty() {
        return "(the page shows nothing an accessibility tree lists)".into();
    }
    let mut out = String::new();
    let mut used = 0;
    for (i, l) in lines.iter().enumerate() {
        let n = l.chars().count() + 1;
        let note = format!("[… {} more lines of the tree not shown]", lines.len() - i);
        let more_after = i + 1 < lines.len();
        if (more_after && used + n > limit.saturating_sub(note.chars().count())) || used + n > limit
        {
            out.push_str(&note);
            return out;
        }
        out.push_str(l);
        out.push('\n');
        used += n;
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::serde_json::{self, json};

    const VP: Viewport = Viewport {
        width: 1000,
        height: 800,
    };

    /// What `Accessibility.getFullAXTree` gives (trimmed: Chromium adds `chromeRole`, name
    /// sources and `frameId`).
    fn sample() -> Value {
        serde_json::from_str(
            r#"{"nodes": [
 {"nodeId":"1","ignored":false,"role":{"type":"role","value":"RootWebArea"},"name":{"type":"computedString","value":"Sign up"},"properties":[{"name":"focusable","value":{"type":"booleanOrUndefined","value":true}},{"name":"focused","value":{"type":"booleanOrUndefined","value":true}}],"childIds":["2"],"backendDOMNodeId":1},
 {"nodeId":"2","ignored":true,"ignoredReasons":[{"name":"uninteresting","value":{"type":"boolean","value":true}}],"role":{"type":"role","value":"none"},"childIds":["3","4","7"],"parentId":"1"},
 {"nodeId":"3","ignored":false,"role":{"type":"role","value":"heading"},"name":{"type":"computedString","value":"Sign up"},"properties":[{"name":"level","value":{"type":"integer","value":1}}],"childIds":["8"],"parentId":"2","backendDOMNodeId":30},
 {"nodeId":"8","ignored":false,"role":{"type":"internalRole","value":"StaticText"},"name":{"type":"computedString","value":"Sign up"},"childIds":["9"],"parentId":"3"},
 {"nodeId":"9","ignored":false,"role":{"type":"internalRole","value":"InlineTextBox"},"name":{"type":"computedString","value":"Sign up"},"childIds":[],"parentId":"8"},
 {"nodeId":"4","ignored":false,"role":{"type":"role","value":"textbox"},"name":{"type":"computedString","value":"Email "},"value":{"type":"string","value":"a@b.c"},"properties":[{"name":"focused","value":{"type":"booleanOrUndefined","value":true}},{"name":"required","value":{"type":"boolean","value":true}}],"childIds":["14"],"parentId":"2","backendDOMNodeId":40},
 {"nodeId":"14","ignored":false,"role":{"type":"role","value":"generic"},"name":{"type":"computedString","value":""},"properties":[{"name":"editable","value":{"type":"token","value":"plaintext"}}],"childIds":["15"],"parentId":"4"},
 {"nodeId":"15","ignored":false,"role":{"type":"internalRole","value":"StaticText"},"name":{"type":"computedString","value":"a@b.c"},"childIds":[],"parentId":"14"},
 {"nodeId":"7","ignored":false,"role":{"type":"role","value":"generic"},"name":{"type":"computedString","value":""},"childIds":["5","6","11","12"],"parentId":"2"},
 {"nodeId":"5","ignored":false,"role":{"type":"role","value":"checkbox"},"name":{"type":"computedString","value":"Subscribe"},"properties":[{"name":"checked","value":{"type":"tristate","value":"true"}}],"childIds":[],"parentId":"7","backendDOMNodeId":50},
 {"nodeId":"6","ignored":false,"role":{"type":"role","value":"button"},"name":{"type":"computedString","value":"Send"},"properties":[{"name":"disabled","value":{"type":"boolean","value":true}}],"childIds":["10"],"parentId":"7","backendDOMNodeId":60},
 {"nodeId":"10","ignored":false,"role":{"type":"internalRole","value":"StaticText"},"name":{"type":"computedString","value":"Send"},"childIds":[],"parentId":"6"},
 {"nodeId":"11","ignored":false,"role":{"type":"role","value":"paragraph"},"childIds":["13"],"parentId":"7"},
 {"nodeId":"13","ignored":false,"role":{"type":"internalRole","value":"StaticText"},"name":{"type":"computedString","value":"Say \"hi\"\n  twice"},"childIds":[],"parentId":"11"},
 {"nodeId":"12","ignored":false,"role":{"type":"role","value":"slider"},"name":{"type":"computedString","value":"Volume"},"value":{"type":"number","value":30},"properties":[{"name":"checked","value":{"type":"tristate","value":"false"}},{"name":"expanded","value":{"type":"booleanOrUndefined","value":false}}],"childIds":[],"parentId":"7"}
]}"#,
        )
        .unwrap()
    }

    /// What `DOMSnapshot.captureSnapshot` gives (trimmed), scrolled down by `scroll_y`.
    fn snapshot(scroll_y: f64) -> Value {
        json!({"documents": [{
            "nodes": {"backendNodeId": [1, 30, 40, 50, 60, 99]},
            "layout": {
                "nodeIndex": [0, 1, 2, 3, 4, 5],
                "bounds": [[0, 0, 1000, 3000], [10, 20, 200, 40], [10, 100, 300, 30],
                           [400, 100, 20, 20], [100, 1500, 200, 50], [5, 5, 0, 0]]
            },
            "scrollOffsetX": 0,
            "scrollOffsetY": scroll_y
        }], "strings": []})
    }

    #[test]
    fn nodes_become_indented_lines_with_their_states() {
        assert_eq!(
            lines(&sample(), &Layout::none(VP)),
            [
                "RootWebArea \"Sign up\" focused",
                "  heading \"Sign up\" level=1",
                "  textbox \"Email\" value=\"a@b.c\" focused required",
                "  checkbox \"Subscribe\" checked",
                "  button \"Send\" disabled",
                "  paragraph",
                "    StaticText \"Say \\\"hi\\\" twice\"",
                "  slider \"Volume\" value=30 unchecked collapsed",
            ]
        );
    }

    #[test]
    fn lines_say_where_their_nodes_are_on_the_grid() {
        let at_top = lines(&sample(), &Layout::from_snapshot(&snapshot(0.0), VP));
        // Centers (110, 40), (160, 115), (410, 110) px; y · 999 / 799.
        assert_eq!(at_top[0], "RootWebArea \"Sign up\" focused");
        assert_eq!(at_top[1], "  heading \"Sign up\" level=1 @[110, 50]");
        assert_eq!(
            at_top[2],
            "  textbox \"Email\" value=\"a@b.c\" focused required @[160, 144]"
        );
        assert_eq!(at_top[3], "  checkbox \"Subscribe\" checked @[410, 138]");
        assert_eq!(at_top[4], "  button \"Send\" disabled (below the screen)");
        let scrolled = lines(&sample(), &Layout::from_snapshot(&snapshot(1000.0), VP));
        assert_eq!(
            scrolled[1],
            "  heading \"Sign up\" level=1 (above the screen)"
        );
        // Center (200, 525) px.
        assert_eq!(scrolled[4], "  button \"Send\" disabled @[200, 656]");
        let layout = Layout::from_snapshot(&snapshot(0.0), VP);
        assert_eq!(layout.place(99), None, "an empty box has no place");
        assert_eq!(layout.place(7), None);
        assert!(Layout::from_snapshot(&json!({}), VP).centers.is_empty());
    }

    #[test]
    fn the_text_is_cut_at_a_line_with_a_note() {
        let none = Layout::none(VP);
        let full = text(&sample(), &none, 10_000);
        assert_eq!(full.lines().count(), 8);
        assert!(!full.ends_with('\n'));
        let cut = text(&sample(), &none, 120);
        assert!(cut.chars().count() <= 120, "{cut}");
        assert!(cut.starts_with("RootWebArea"));
        assert!(cut.ends_with("more lines of the tree not shown]"), "{cut}");
        assert_eq!(
            text(&json!({"nodes": []}), &none, 100),
            "(the page shows nothing an accessibility tree lists)"
        );
        // A cycle or a missing child does not loop or fail.
        let odd = json!({"nodes": [
            {"nodeId": "1", "role": {"value": "button"}, "name": {"value": "A"}, "childIds": ["2", "9"]},
            {"nodeId": "2", "parentId": "1", "role": {"value": "link"}, "name": {"value": "B"}, "childIds": ["1"]}
        ]});
        assert_eq!(lines(&odd, &none), ["button \"A\"", "  link \"B\""]);
    }
}
