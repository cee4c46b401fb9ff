//! The `code_interpreter` tool: its schema, the calls an assistant message makes, and how their
//! output goes back.

use openclaw_env_kit::blocks;
use openclaw_plugin_api::serde_json::Value;
use openclaw_plugin_api::Message;

/// The tool's name.
pub const NAME: &str = "code_interpreter";

/// The OpenAI `tools` array offering the interpreter, as its text. Written out rather than
/// built with `json!`, whose key order depends on a serde_json feature: the prompt a model sees
/// renders the keys in this order (the order OpenAI's documentation and Qwen's templates use),
/// and a model trained on one order should be shown the same.
pub const SCHEMA: &str = r#"[{"type": "function", "function": {"name": "code_interpreter", "description": "Runs Python 3 code in a sandbox (no network, no files outside its working directory; files written there stay for later calls, variables do not) and returns what it prints to stdout and stderr.", "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "The Python code to run."}}, "required": ["code"]}}}]"#;

/// [`SCHEMA`], owned.
pub fn schema() -> String {
    SCHEMA.to_string()
}

/// One call the agent made: the code to run, or why the call cannot run.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The OpenAI tool-call id it answers, when the call came as one.
    pub id: Option<String>,
    /// The code, or the error the agent gets back instead of output.
    pub code: Result<String, String>,
}

/// The calls in an assistant message: OpenAI `tool_calls` when it has them; otherwise, in its
/// text, `<tool_call>{json}</tool_call>` blocks, else `<code>…</code>` blocks, else
/// ```` ```python ```` blocks (the forms the original accepts).
pub fn calls(message: &Message) -> Vec<Call> {
    let text = message.content.as_str();
    let tagged = message.tool_calls_json.is_some() || text.contains("<tool_call>");
    if tagged {
        return openclaw_env_kit::tool_calls(message)
            .into_iter()
            .map(|c| Call {
                code: c.args.and_then(|args| named_code(&c.name, &args)),
                id: c.id,
            })
            .collect();
    }
    let code = blocks(text, "<code>", "</code>");
    let code = if code.is_empty() {
        blocks(text, "```python", "```")
    } else {
        code
    };
    code.into_iter()
        .map(|b| Call {
            id: None,
            code: Ok(b.trim().to_string()),
        })
        .collect()
}

fn named_code(name: &str, args: &Value) -> Result<String, String> {
    match name {
        NAME => {}
        "" => {
            return Err(format!(
                "the tool call has no name; the only tool is `{NAME}`"
            ))
        }
        other => return Err(format!("unknown tool `{other}`; the only tool is `{NAME}`")),
    }
    match args.get("code").and_then(Value::as_str) {
        Some(code) => Ok(code.to_string()),
        None => Err(format!("`{NAME}` needs a string argument `code`")),
    }
}

/// The tool message answering `call` with `output`, wrapped as the original wraps it and cut to
/// `limit` characters.
pub fn result_message(call: &Call, output: &str, limit: usize) -> Message {
    let cut: String = output.chars().take(limit).collect();
    let more = if cut.len() < output.len() {
        "\n[output cut]"
    } else {
        ""
    };
    let mut m = Message::new(
        "tool",
        &format!("<interpreter>\n{cut}{more}\n</interpreter>"),
    );
    m.name = openclaw_plugin_api::abi_stable::std_types::ROption::RSome(NAME.into());
    if let Some(id) = &call.id {
        m.tool_call_id =
            openclaw_plugin_api::abi_stable::std_types::ROption::RSome(id.as_str().into());
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use openclaw_plugin_api::abi_stable::std_types::ROption;
    use openclaw_plugin_api::serde_json;
    use openclaw_plugin_api::serde_json::json;

    #[test]
    fn the_schema_is_an_openai_tools_array_in_the_usual_key_order() {
        let v: Value = serde_json::from_str(SCHEMA).unwrap();
        assert_eq!(v[0]["function"]["name"], NAME);
        assert_eq!(v[0]["function"]["parameters"]["required"], json!(["code"]));
        let name = SCHEMA.find("\"name\"").unwrap();
        assert!(
            SCHEMA.find("\"type\"").unwrap() < name
                && name < SCHEMA.find("\"description\"").unwrap()
        );
    }

    fn assistant(text: &str) -> Message {
        Message::new("assistant", text)
    }

    #[test]
    fn openai_calls_come_first_and_name_the_tool() {
        let mut m = assistant("<code>print(1)</code>");
        m.tool_calls_json = ROption::RSome(
            json!([
                {"id": "c1", "type": "function", "function": {"name": "code_interpreter", "arguments": "{\"code\": \"print(2)\"}"}},
                {"id": "c2", "type": "function", "function": {"name": "web_search", "arguments": "{}"}},
                {"id": "c3", "type": "function", "function": {"name": "code_interpreter", "arguments": {"code": "print(3)"}}}
            ])
            .to_string()
            .into(),
        );
        let c = calls(&m);
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].id.as_deref(), Some("c1"));
        assert_eq!(c[0].code.as_deref(), Ok("print(2)"));
        assert!(c[1]
            .code
            .as_ref()
            .unwrap_err()
            .contains("unknown tool `web_search`"));
        assert_eq!(c[2].code.as_deref(), Ok("print(3)"));
    }

    #[test]
    fn text_forms_are_read_in_the_originals_order() {
        let c = calls(&assistant(
            "<tool_call>{\"name\": \"code_interpreter\", \"arguments\": {\"code\": \"print(4)\"}}</tool_call>",
        ));
        assert_eq!(c[0].code.as_deref(), Ok("print(4)"));
        let c = calls(&assistant("<tool_call>{not json</tool_call>"));
        assert!(c[0].code.as_ref().unwrap_err().contains("not valid JSON"));
        let c = calls(&assistant("Let me compute.\n<code>\nprint(5)\n</code>"));
        assert_eq!(c[0].code.as_deref(), Ok("print(5)"));
        let c = calls(&assistant(
            "```python\nprint(6)\n```\nand ```python\nprint(7)",
        ));
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].code.as_deref(), Ok("print(7)"));
        assert!(calls(&assistant("Answer: \\boxed{3}")).is_empty());
    }

    #[test]
    fn output_is_wrapped_and_cut() {
        let call = Call {
            id: Some("c9".into()),
            code: Ok(String::new()),
        };
        let m = result_message(&call, &"x".repeat(2000), 1024);
        assert_eq!(m.role.as_str(), "tool");
        assert!(m.content.starts_with("<interpreter>\n"));
        assert!(m.content.ends_with("[output cut]\n</interpreter>"));
        assert_eq!(m.content.matches('x').count(), 1024);
        assert_eq!(
            m.tool_call_id.as_ref().into_option().unwrap().as_str(),
            "c9"
        );
    }
}
