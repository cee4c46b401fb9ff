//! The shell tools, with the original's names and arguments (CAMEL's terminal toolkit): their
//! schemas, the calls an assistant message makes, and how output is cut.

use openclaw_plugin_api::serde_json::Value;
use openclaw_plugin_api::Message;

/// Runs a command in a named shell session.
pub const SHELL_EXEC: &str = "shell_exec";
/// Shows a session's output.
pub const SHELL_VIEW: &str = "shell_view";
/// Writes a line to a session's running process.
pub const SHELL_WRITE_TO_PROCESS: &str = "shell_write_to_process";
/// Writes a file.
pub const SHELL_WRITE_CONTENT_TO_FILE: &str = "shell_write_content_to_file";

/// Every tool, in the order the schema lists them.
pub const ALL: [&str; 4] = [
    SHELL_EXEC,
    SHELL_VIEW,
    SHELL_WRITE_TO_PROCESS,
    SHELL_WRITE_CONTENT_TO_FILE,
];

/// Each tool's OpenAI function schema, as text in the key order OpenAI's documentation and
/// Qwen's templates use (written out, as `json!`'s key order depends on a serde_json feature).
const SCHEMAS: [&str; 4] = [
    r#"{"type": "function", "function": {"name": "shell_exec", "description": "Runs a shell command (bash) in a session, starting in the directory where the session's last command ended (/app at first). Blocking by default: waits until it ends, at most `timeout` seconds, and returns its output. With block=false it starts in the background: read its output with shell_view and write to its stdin with shell_write_to_process. Every command runs in a fresh sandbox: files under /app stay, processes and variables do not reach later commands.", "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": "The session's name."}, "command": {"type": "string", "description": "The command to run."}, "block": {"type": "boolean", "description": "Wait for it to end (true, the default) or run it in the background (false)."}, "timeout": {"type": "number", "description": "Seconds to wait for a blocking command (20 when not given)."}}, "required": ["id", "command"]}}}"#,
    r#"{"type": "function", "function": {"name": "shell_view", "description": "Shows the output a session's background process printed since the last view, and whether it still runs (for a session without one, the output of its last command).", "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": "The session's name."}}, "required": ["id"]}}}"#,
    r#"{"type": "function", "function": {"name": "shell_write_to_process", "description": "Writes a line to the stdin of a session's background process and returns what it printed in answer.", "parameters": {"type": "object", "properties": {"id": {"type": "string", "description": "The session's name."}, "command": {"type": "string", "description": "The text to write (a newline is added)."}}, "required": ["id", "command"]}}}"#,
    r#"{"type": "function", "function": {"name": "shell_write_content_to_file", "description": "Writes text to a file (made with its directories when missing, replaced when there); a relative path is taken from /app.", "parameters": {"type": "object", "properties": {"content": {"type": "string", "description": "The file's new contents."}, "file_path": {"type": "string", "description": "The file's path."}}, "required": ["content", "file_path"]}}}"#,
];

/// The OpenAI `tools` array offering `offered` (a subset of [`ALL`], in its order).
pub fn schema(offered: &[&str]) -> String {
    let items: Vec<&str> = ALL
        .iter()
        .zip(SCHEMAS)
        .filter(|(name, _)| offered.contains(name))
        .map(|(_, s)| s)
        .collect();
    format!("[{}]", items.join(", "))
}

/// One call the agent made.
pub type Call = openclaw_env_kit::ToolCall;

/// The calls in an assistant message: OpenAI `tool_calls` when it has them, else
/// `<tool_call>{json}</tool_call>` blocks in its text (the original's form).
pub fn calls(message: &Message) -> Vec<Call> {
    openclaw_env_kit::tool_calls(message)
}

/// The call's arguments when it names one of `offered` and has its required arguments: else
/// why it cannot be read (what counts toward the episode's parse errors).
pub fn readable<'a>(call: &'a Call, offered: &[&str]) -> Result<&'a Value, String> {
    let args = call.args.as_ref().map_err(Clone::clone)?;
    let name = call.name.as_str();
    if !offered.contains(&name) {
        return Err(if name.is_empty() {
            format!(
                "the tool call has no name; the tools are {}",
                offered.join(", ")
            )
        } else {
            format!(
                "unknown tool `{name}`; the tools are {}",
                offered.join(", ")
            )
        });
    }
    let required: &[&str] = match name {
        SHELL_EXEC | SHELL_WRITE_TO_PROCESS => &["id", "command"],
        SHELL_VIEW => &["id"],
        _ => &["content", "file_path"],
    };
    for key in required {
        text(args, key, name)?;
    }
    Ok(args)
}

/// A string argument.
pub fn text<'a>(args: &'a Value, key: &str, tool: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{tool}` needs a string argument `{key}`"))
}

/// `text` cut to `limit` characters: 30% from the head, the rest from the tail (where errors
/// and results usually are), joined by the original's marker.
pub fn cut(text: &str, limit: usize) -> String {
    const MARK: &str = "\n[OMITTED MIDDLE]\n";
    let n = text.chars().count();
    if n <= limit {
        return text.to_string();
    }
    let head = limit * 3 / 10;
    let tail = limit - head;
    let h: String = text.chars().take(head).collect();
    let t: String = text.chars().skip(n - tail).collect();
    format!("{h}{MARK}{t}")
}

/// The tool message answering `call`.
pub fn result_message(call: &Call, output: &str) -> Message {
    use openclaw_plugin_api::abi_stable::std_types::ROption::RSome;
    let mut m = Message::new("tool", output);
    if !call.name.is_empty() {
        m.name = RSome(call.name.as_str().into());
    }
    if let Some(id) = &call.id {
        m.tool_call_id = RSome(id.as_str().into());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::serde_json;

    #[test]
    fn the_schema_is_json_and_lists_the_offered_tools_in_order() {
        let all: Value = serde_json::from_str(&schema(&ALL)).unwrap();
        let names: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ALL);
        let some: Value = serde_json::from_str(&schema(&[SHELL_VIEW, SHELL_EXEC])).unwrap();
        assert_eq!(some[0]["function"]["name"], SHELL_EXEC);
        assert_eq!(some.as_array().unwrap().len(), 2);
    }

    #[test]
    fn calls_are_read_from_both_forms_and_bad_ones_say_why() {
        let m = Message::new(
            "assistant",
            "ok <tool_call>\n{\"name\": \"shell_exec\", \"arguments\": {\"id\": \"a\", \"command\": \"ls\"}}\n</tool_call> and <tool_call>{bad</tool_call>",
        );
        let c = calls(&m);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].name, SHELL_EXEC);
        assert_eq!(c[0].args.as_ref().unwrap()["command"], "ls");
        assert!(c[1]
            .args
            .as_ref()
            .unwrap_err()
            .starts_with("json_parse_error"));
        let mut m = Message::new("assistant", "");
        m.tool_calls_json = openclaw_plugin_api::abi_stable::std_types::ROption::RSome(
            r#"[{"id": "c1", "type": "function", "function": {"name": "shell_view", "arguments": "{\"id\": \"s\"}"}}]"#.into(),
        );
        let c = calls(&m);
        assert_eq!(
            (c[0].id.as_deref(), c[0].name.as_str()),
            (Some("c1"), SHELL_VIEW)
        );
        assert_eq!(text(c[0].args.as_ref().unwrap(), "id", SHELL_VIEW), Ok("s"));
        assert!(text(c[0].args.as_ref().unwrap(), "command", SHELL_VIEW).is_err());
    }

    #[test]
    fn long_output_keeps_its_head_and_tail() {
        let text: String = (0..1000).map(|i| format!("{i}\n")).collect();
        let c = cut(&text, 100);
        assert!(c.starts_with("0\n1\n"));
        assert!(c.ends_with("998\n999\n"));
        assert!(c.contains("[OMITTED MIDDLE]"));
        assert_eq!(cut("short", 100), "short");
    }
}
