//! Tools for a chat template that has no tools section: the tool schemas go into the system
//! prompt, and the conversation's tool calls and results into its messages, in the format of
//! Qwen's templates (Hermes-style tool calling, which [`crate::OutputParser`] reads back and
//! [`crate::CHATML_TEMPLATE`] renders itself).

use anyhow::{anyhow, Result};
use minijinja::value::Serde;
use minijinja::Value;
use serde_json::Value as Json;

use crate::message::{ChatMessage, MessageContent};
use crate::pyjson::{self, DumpOptions};

/// How the tools given with a conversation reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsRoute {
    /// The chat template renders `tools` itself.
    Template,
    /// The chat template has no tools section: the tools are written into the system prompt
    /// ([`tools_system_prompt`]) and the template renders the conversation without them.
    SystemPrompt,
}

impl ToolsRoute {
    /// The line a run with an environment starts with; `model` names the model whose template
    /// this is.
    pub fn line(self, model: &str) -> String {
        match self {
            ToolsRoute::Template => "tools: the chat template's own tools section".to_owned(),
            ToolsRoute::SystemPrompt => format!(
                "tools: in the system prompt (the chat template of {model} has no tools section)"
            ),
        }
    }
}

/// Qwen's words before the schemas.
const TOOLS_HEAD: &str = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";

/// Qwen's words after the schemas.
const TOOLS_TAIL: &str = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/// The tools of a `tools` value: an array's items; `null` has none, and anything else is taken
/// as one tool.
pub(crate) fn tool_list(tools: &Json) -> Vec<&Json> {
    match tools {
        Json::Array(items) => items.iter().collect(),
        Json::Null => Vec::new(),
        other => vec![other],
    }
}

/// `json.dumps(value)`, as the `tojson` of Qwen's template writes it.
fn dumps(value: &Json) -> Result<String> {
    pyjson::dumps(&Value::from(Serde(value)), &DumpOptions::default())
        .map_err(|e| anyhow!("cannot write {value} as JSON for the prompt: {e}"))
}

/// The tools section of the system prompt, as Qwen's templates write it: its instructions, and
/// the schemas between `<tools>` and `</tools>`, one per line.
pub fn tools_system_prompt(tools: &Json) -> Result<String> {
    let mut s = String::from(TOOLS_HEAD);
    for tool in tool_list(tools) {
        s.push('\n');
        s.push_str(&dumps(tool)?);
    }
    s.push_str(TOOLS_TAIL);
    Ok(s)
}

/// `messages` as a template without a tools section renders what Qwen's templates render with
/// `tools`: the tools section closes the system message (one is added first when there is
/// none), an assistant's tool calls follow its text as `<tool_call>` blocks, and each run of
/// tool results becomes one user message of `<tool_response>` blocks. Without this the model
/// would never see the calls it made, and a template that knows no `tool` role might refuse it.
pub(crate) fn tools_in_messages(
    messages: &[ChatMessage],
    tools: &Json,
) -> Result<Vec<ChatMessage>> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
    let mut after_tool = false;
    for m in messages {
        let is_tool = m.role == "tool";
        if is_tool {
            let response = format!("<tool_response>\n{}\n</tool_response>", m.text());
            // A result after a result joins the user message its run opened.
            match out.last_mut().filter(|_| after_tool) {
                Some(last) => {
                    last.content =
                        Some(MessageContent::Text(format!("{}\n{response}", last.text())));
                }
                None => out.push(ChatMessage::new("user", response)),
            }
        } else if m.tool_calls.as_ref().is_some_and(|c| !c.is_empty()) {
            out.push(calls_in_content(m)?);
        } else {
            out.push(m.clone());
        }
        after_tool = is_tool;
    }
    let section = tools_system_prompt(tools)?;
    match out
        .first_mut()
        .filter(|m| m.role == "system" || m.role == "developer")
    {
        Some(first) => {
            first.content = Some(MessageContent::Text(format!(
                "{}\n\n{section}",
                first.text()
            )));
        }
        None => out.insert(0, ChatMessage::new("system", section)),
    }
    Ok(out)
}

/// An assistant message with its tool calls written after its text, as Qwen3's template (and
/// [`crate::CHATML_TEMPLATE`]) writes them: arguments given as a string as they are, others as
/// `tojson` writes them.
fn calls_in_content(m: &ChatMessage) -> Result<ChatMessage> {
    let mut text = m.text();
    for (i, call) in m.tool_calls.iter().flatten().enumerate() {
        if i > 0 || !text.is_empty() {
            text.push('\n');
        }
        let arguments = match &call.function.arguments {
            Json::String(s) => s.clone(),
            other => dumps(other)?,
        };
        text.push_str(&format!(
            "<tool_call>\n{{\"name\": \"{}\", \"arguments\": {arguments}}}\n</tool_call>",
            call.function.name
        ));
    }
    Ok(ChatMessage {
        content: Some(MessageContent::Text(text)),
        tool_calls: None,
        ..m.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChatTemplate, OutputParser, ParserOptions, RenderOptions, CHATML_TEMPLATE};
    use serde_json::json;

    /// SmolLM2-135M-Instruct's chat template, from its GGUF: ChatML with a default system
    /// message and no tools section.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn tools() -> Json {
        json!([
            {"type": "function", "function": {"name": "shell_exec", "description": "Runs a command in the shell.",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
            {"type": "function", "function": {"name": "shell_view", "description": "Shows the shell's output, é.",
             "parameters": {"type": "object", "properties": {}}}}
        ])
    }

    fn prompt() -> RenderOptions {
        RenderOptions {
            add_generation_prompt: true,
            ..Default::default()
        }
    }

    /// A conversation with a system message, a call and a run of two tool results.
    fn episode() -> Vec<ChatMessage> {
        let call: ChatMessage = serde_json::from_value(json!({
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "shell_exec", "arguments": "{\"command\": \"ls\"}"}},
                           {"id": "call_2", "type": "function",
                            "function": {"name": "shell_view", "arguments": {"id": 1}}}]}))
        .unwrap();
        vec![
            ChatMessage::new("system", "You are in a terminal."),
            ChatMessage::new("user", "List the files."),
            call,
            ChatMessage::new("tool", "a.txt"),
            ChatMessage::new("tool", "$ "),
        ]
    }

    #[test]
    fn a_template_with_a_tools_section_keeps_using_it() {
        let t = ChatTemplate::from_source(
            "own",
            "{% if tools %}[TOOLS]{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif %}\
             {% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}",
        )
        .unwrap();
        assert_eq!(t.tools_route(), ToolsRoute::Template);
        let out = t
            .render(&[ChatMessage::new("user", "hi")], Some(&tools()), &prompt())
            .unwrap();
        assert_eq!(out, "[TOOLS]shell_exec;shell_view;<user>hi");
        // The project's own ChatML writes tools itself too.
        let chatml = ChatTemplate::from_source("chatml", CHATML_TEMPLATE).unwrap();
        assert_eq!(chatml.tools_route(), ToolsRoute::Template);
        assert_eq!(
            ToolsRoute::Template.line("m.gguf"),
            "tools: the chat template's own tools section"
        );
    }

    #[test]
    fn a_template_without_one_gets_the_tools_in_the_system_prompt() {
        let t = ChatTemplate::from_source("smollm2", SMOLLM2).unwrap();
        assert_eq!(t.tools_route(), ToolsRoute::SystemPrompt);
        assert_eq!(
            ToolsRoute::SystemPrompt.line("m.gguf"),
            "tools: in the system prompt (the chat template of m.gguf has no tools section)"
        );
        // No system message: the tools section is the system message.
        let out = t
            .render(&[ChatMessage::new("user", "hi")], Some(&tools()), &prompt())
            .unwrap();
        assert!(out.starts_with("<|im_start|>system\n# Tools\n\n"), "{out}");
        assert!(
            out.contains(
                "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"shell_exec\", \
                 \"description\": \"Runs a command in the shell.\", \"parameters\": {\"type\": \
                 \"object\", \"properties\": {\"command\": {\"type\": \"string\"}}, \"required\": \
                 [\"command\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"shell_view\""
            ),
            "{out}"
        );
        assert!(out.ends_with(
            "</tool_call><|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        ));
        assert!(!out.contains("named SmolLM"), "{out}");
        // What the model sees is what a template with Qwen's tools section shows, with or
        // without a system message, calls and results included.
        let chatml = ChatTemplate::from_source("chatml", CHATML_TEMPLATE).unwrap();
        for conversation in [episode(), episode()[1..2].to_vec()] {
            assert_eq!(
                t.render(&conversation, Some(&tools()), &prompt()).unwrap(),
                chatml
                    .render(&conversation, Some(&tools()), &prompt())
                    .unwrap()
            );
        }
        // Without tools (or with none listed) the template renders the conversation as it is.
        let plain = t.render(&episode()[..2], None, &prompt()).unwrap();
        assert!(!plain.contains("# Tools"));
        assert_eq!(
            t.render(&episode()[..2], Some(&json!([])), &prompt())
                .unwrap(),
            plain
        );
    }

    #[test]
    fn calls_written_for_the_system_prompt_are_read_back_and_shown_as_generated() {
        let t = ChatTemplate::from_source("smollm2", SMOLLM2).unwrap();
        let mut conversation = episode()[..2].to_vec();
        let prompt_text = t.render(&conversation, Some(&tools()), &prompt()).unwrap();
        let generated = "I will look.\n<tool_call>\n{\"name\": \"shell_exec\", \"arguments\": \
                         {\"command\": \"ls -a\"}}\n</tool_call>";
        let parsed = OutputParser::parse(
            generated,
            ParserOptions {
                parse_tool_calls: true,
                ..ParserOptions::for_prompt(&prompt_text)
            },
        );
        assert_eq!(parsed.content, "I will look.");
        assert_eq!(parsed.tool_calls.len(), 1);
        assert_eq!(parsed.tool_calls[0].name, "shell_exec");
        assert_eq!(parsed.tool_calls[0].arguments, r#"{"command": "ls -a"}"#);
        // The next prompt shows the call as the model wrote it.
        conversation.push(parsed.to_chat_message());
        conversation.push(ChatMessage::new("tool", "a.txt"));
        let next = t.render(&conversation, Some(&tools()), &prompt()).unwrap();
        assert!(
            next.contains(&format!(
                "<|im_start|>assistant\n{generated}<|im_end|>\n<|im_start|>user\n\
                 <tool_response>\na.txt\n</tool_response><|im_end|>\n"
            )),
            "{next}"
        );
    }

    #[test]
    fn a_template_that_refuses_tools_is_left_to_say_why() {
        let t = ChatTemplate::from_source(
            "refuses",
            "{% if tools %}{{ raise_exception('no tools here') }}{% endif %}{{ messages[0].content }}",
        )
        .unwrap();
        assert_eq!(t.tools_route(), ToolsRoute::Template);
        let e = t
            .render(&[ChatMessage::new("user", "hi")], Some(&tools()), &prompt())
            .unwrap_err();
        assert!(e.to_string().contains("no tools here"), "{e}");
    }
}
