//! The request parser's answers: what it accepts, and what it refuses with which message.

use super::*;
use axum::http::StatusCode;
use openclaw_buffer::messages::content_text;
use openclaw_chat::MessageContent;
use serde_json::json;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.parse().unwrap());
    }
    h
}

#[test]
fn what_a_stock_agent_client_sends_is_accepted() {
    let body = json!({
        "model": "default",
        "messages": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": [{"type": "text", "text": "session abc: list files"}]}
        ],
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_completion_tokens": 1,
        "tool_choice": "auto",
        "tools": [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}],
        "parallel_tool_calls": true,
        "store": false
    });
    let r = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap();
    assert!(r.stream && r.include_usage);
    assert_eq!(r.sampling.max_tokens, Some(1));
    assert_eq!(r.messages[1].text(), "session abc: list files");
    assert!(r.tools.is_some());
    assert_eq!(r.hints, SessionHints::default());
}

#[test]
fn session_hints_come_from_headers_then_body_and_user_is_only_an_end_user() {
    let body = json!({"messages": [{"role": "user", "content": "hi"}], "session_id": "b", "turn_type": "side", "user": "u", "session_done": true});
    let r = parse(
        body.to_string().as_bytes(),
        &headers(&[("x-session-id", "h"), ("x-turn-type", "MAIN")]),
    )
    .unwrap();
    assert_eq!(r.hints.session_id.as_deref(), Some("h"));
    assert_eq!(r.hints.turn_type, Some(TurnType::Main));
    assert!(r.hints.done);
    let body = json!({"messages": [{"role": "user", "content": "hi"}], "user": "John Smith"});
    let r = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap();
    assert_eq!(
        r.hints.session_id, None,
        "an end user is not a conversation"
    );
    let body = json!({"messages": [{"role": "user", "content": "hi"}], "user": 7});
    let e = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("user"));
}

fn param_of(body: Value) -> (Option<String>, String) {
    let e = parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap_err();
    (e.param, e.message)
}

#[test]
fn sampling_settings_not_implemented_are_refused_by_name_unless_neutral() {
    let base = || json!({"messages": [{"role": "user", "content": "x"}]});
    for (k, neutral, other) in [
        ("frequency_penalty", json!(0.0), json!(0.5)),
        ("presence_penalty", json!(0), json!(1)),
        ("repetition_penalty", json!(1.0), json!(1.1)),
        ("min_p", json!(0), json!(0.05)),
        ("logit_bias", json!({}), json!({"42": 5})),
    ] {
        let mut b = base();
        b[k] = neutral;
        assert!(
            parse(b.to_string().as_bytes(), &HeaderMap::new()).is_ok(),
            "{k}"
        );
        let mut b = base();
        b[k] = other;
        let (param, message) = param_of(b);
        assert_eq!(param.as_deref(), Some(k));
        assert!(message.contains("not supported"), "{message}");
    }
}

#[test]
fn vllm_habits_top_k_minus_one_tool_choice_tool_schemas_and_template_kwargs() {
    let ok = |b: Value| parse(b.to_string().as_bytes(), &HeaderMap::new()).unwrap();
    let msgs = json!([{"role": "user", "content": "x"}]);
    assert_eq!(
        ok(json!({"messages": msgs, "top_k": -1})).sampling.top_k,
        None
    );
    assert_eq!(
        ok(json!({"messages": msgs, "top_k": 5})).sampling.top_k,
        Some(5)
    );
    assert_eq!(
        param_of(json!({"messages": msgs, "top_k": -3}))
            .0
            .as_deref(),
        Some("top_k")
    );

    let tool =
        json!({"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}});
    let r = ok(json!({"messages": msgs, "tools": [tool], "tool_choice": "auto"}));
    assert!(r.tools.is_some());
    let r = ok(json!({"messages": msgs, "tools": [tool], "tool_choice": "none"}));
    assert!(r.tools.is_none());
    for choice in [
        json!("sometimes"),
        json!({"type": "function", "function": {"name": "write"}}),
    ] {
        let (param, message) =
            param_of(json!({"messages": msgs, "tools": [tool], "tool_choice": choice}));
        assert_eq!(param.as_deref(), Some("tool_choice"), "{message}");
    }
    let (_, message) = param_of(
        json!({"messages": msgs, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "write"}}}),
    );
    assert!(message.contains("not in `tools`"), "{message}");
    for bad in [
        json!({"type": "function", "function": {"name": "has space"}}),
        json!({"type": "retrieval", "function": {"name": "x"}}),
        json!({"type": "function", "function": {"name": "x", "parameters": "object"}}),
        json!({"type": "function"}),
    ] {
        let (param, message) = param_of(json!({"messages": msgs, "tools": [bad]}));
        assert_eq!(param.as_deref(), Some("tools"), "{message}");
        assert!(message.starts_with("tools[0]"), "{message}");
    }

    assert_eq!(ok(json!({"messages": msgs})).logprobs, None);
    assert_eq!(
        ok(json!({"messages": msgs, "logprobs": true})).logprobs,
        Some(0)
    );
    assert_eq!(
        ok(json!({"messages": msgs, "logprobs": true, "top_logprobs": 5})).logprobs,
        Some(5)
    );
    for bad in [
        json!({"messages": msgs, "top_logprobs": 2}),
        json!({"messages": msgs, "logprobs": true, "top_logprobs": 21}),
    ] {
        assert_eq!(param_of(bad).0.as_deref(), Some("top_logprobs"));
    }
    let r =
        ok(json!({"messages": msgs, "chat_template_kwargs": {"enable_thinking": false, "x": 1}}));
    assert_eq!(r.template_kwargs["enable_thinking"], json!(false));
    assert_eq!(
        param_of(json!({"messages": msgs, "chat_template_kwargs": {"enable_thinking": "no"}}))
            .0
            .as_deref(),
        Some("chat_template_kwargs")
    );
}

#[test]
fn bad_requests_get_openai_errors_naming_the_field() {
    let cases: Vec<(&[u8], &str, Option<&str>)> = vec![
        (b"{not json", "not valid JSON", None),
        (b"[1,2]", "must be a JSON object", None),
        (
            br#"{"model":"m"}"#,
            "Missing required parameter: 'messages'",
            Some("messages"),
        ),
        (br#"{"messages":[]}"#, "must not be empty", Some("messages")),
        (
            br#"{"mesages":[{"role":"user","content":"x"}]}"#,
            "Unrecognized request argument supplied: mesages",
            Some("mesages"),
        ),
        (
            br#"{"messages":[{"role":"robot","content":"x"}]}"#,
            "role must be one of",
            Some("messages"),
        ),
        (
            br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
            "type `image_url`",
            Some("messages"),
        ),
        (
            br#"{"messages":[{"role":"user","content":"x"}],"temperature":5}"#,
            "between 0 and 2",
            Some("temperature"),
        ),
        (
            br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-1}"#,
            "non-negative",
            Some("max_tokens"),
        ),
        (
            br#"{"messages":[{"role":"user","content":"x"}],"n":9}"#,
            "from 1 to 8, got 9",
            Some("n"),
        ),
        (
            br#"{"messages":[{"role":"user","content":"x"}],"n":0}"#,
            "from 1 to 8, got 0",
            Some("n"),
        ),
        (
            br#"{"messages":[{"role":"user","content":"x"}],"session_id":"../../etc"}"#,
            "session id",
            Some("session_id"),
        ),
        (
            br#"{"messages":[{"role":"user","content":"x"}],"turn_type":"middle"}"#,
            "`main` or `side`",
            Some("turn_type"),
        ),
    ];
    for (body, msg, param) in cases {
        let e = parse(body, &HeaderMap::new()).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.message.contains(msg),
            "{} -> {}",
            String::from_utf8_lossy(body),
            e.message
        );
        assert_eq!(
            e.param.as_deref(),
            param,
            "{}",
            String::from_utf8_lossy(body)
        );
        assert_eq!(e.body()["error"]["type"], "invalid_request_error");
    }
    let e = ApiError::context_length(256, 300);
    assert_eq!(e.body()["error"]["code"], "context_length_exceeded");
}

/// The request `body` reads as; it must be accepted.
fn accepted(body: &Value) -> ChatRequest {
    parse(body.to_string().as_bytes(), &HeaderMap::new()).unwrap()
}

/// Asserts that each body is refused with a 400 naming `param`, its message holding `says`.
fn assert_refused(cases: &[(&str, &str, &str)]) {
    for (body, param, says) in cases {
        let e = parse(body.as_bytes(), &HeaderMap::new()).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(e.param.as_deref(), Some(*param), "{body}: {}", e.message);
        assert!(e.message.contains(*says), "{body}: {}", e.message);
    }
}

#[test]
fn a_field_of_the_wrong_kind_is_refused_by_name_and_rule() {
    assert_refused(&[
        (
            r#"{"messages":[{"role":"user","content":"x"}],"model":5}"#,
            "model",
            "`model` must be a string.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"stream":"yes"}"#,
            "stream",
            "`stream` must be a boolean.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"stream_options":true}"#,
            "stream_options",
            "`stream_options` must be an object.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#,
            "temperature",
            "`temperature` must be a number.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"top_p":0}"#,
            "top_p",
            "`top_p` must be in (0, 1], got 0.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"top_k":5.5}"#,
            "top_k",
            "or -1 to disable it; got 5.5.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"top_k":"5"}"#,
            "top_k",
            "`top_k` must be an integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":1.5}"#,
            "max_tokens",
            "`max_tokens` must be a non-negative integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":"5"}"#,
            "max_tokens",
            "`max_tokens` must be an integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
            "max_completion_tokens",
            "`max_completion_tokens` must be at least 1.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":5,"max_tokens":-1}"#,
            "max_tokens",
            "`max_tokens` must be a non-negative integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"seed":-1}"#,
            "seed",
            "`seed` must be a non-negative integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"n":1.0}"#,
            "n",
            "`n` must be a non-negative integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e"]}"#,
            "stop",
            "`stop` takes at most 4 strings.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"stop":[1]}"#,
            "stop",
            "`stop` must be a string or an array of strings.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":{}}"#,
            "tools",
            "`tools` must be an array.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tool_choice":5}"#,
            "tool_choice",
            "`tool_choice` must be a string or",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tool_choice":["function",{"name":"f"}]}"#,
            "tool_choice",
            "`tool_choice` must be a string or",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}"#,
            "tool_choice",
            "`tool_choice` is \"required\" but the request offers no `tools`",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"logprobs":1}"#,
            "logprobs",
            "`logprobs` must be a boolean.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":-1}"#,
            "top_logprobs",
            "`top_logprobs` must be a non-negative integer.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":[]}"#,
            "chat_template_kwargs",
            "`chat_template_kwargs` must be an object.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":null}}"#,
            "chat_template_kwargs",
            "`chat_template_kwargs.enable_thinking` must be a boolean.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"session_id":""}"#,
            "session_id",
            "The session id must be",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"turn_type":5}"#,
            "turn_type",
            "turn_type must be `main` or `side`, got `5`",
        ),
    ]);
}

#[test]
fn a_bad_message_is_refused_with_its_index_and_what_is_wrong() {
    assert_refused(&[
        (
            r#"{"messages":null}"#,
            "messages",
            "`messages` must be an array.",
        ),
        (
            r#"{"messages":{"role":"user","content":"x"}}"#,
            "messages",
            "`messages` must be an array.",
        ),
        (
            r#"{"messages":[["user","x"]]}"#,
            "messages",
            "messages[0] must be an object.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"},{"content":"y"}]}"#,
            "messages",
            "messages[1].role must be one of system, developer, user, assistant, tool; got ``.",
        ),
        (
            r#"{"messages":[{"role":5,"content":"x"}]}"#,
            "messages",
            "messages[0].role must be one of",
        ),
        (
            r#"{"messages":[{"role":"user","content":5}]}"#,
            "messages",
            "messages[0].content must be a string, null or an array of text parts",
        ),
        (
            r#"{"messages":[{"role":"user","content":[{"type":"text"}]}]}"#,
            "messages",
            "messages[0].content[0] has no string `text`",
        ),
        (
            r#"{"messages":[{"role":"user","content":[{"text":"x"}]}]}"#,
            "messages",
            "messages[0].content[0] has no `type`",
        ),
        (
            r#"{"messages":[{"role":"user","content":[["text","x"]]}]}"#,
            "messages",
            "messages[0].content[0] has no `type`",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x","name":5}]}"#,
            "messages",
            "messages[0]: invalid type",
        ),
    ]);
}

#[test]
fn a_bad_tool_is_refused_with_its_index_and_what_is_wrong() {
    assert_refused(&[
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"type":null,"function":{"name":"f"}}]}"#,
            "tools",
            "tools[0]: `type` must be \"function\", got null.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":5}}]}"#,
            "tools",
            "tools[0]: has no function.name.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":""}}]}"#,
            "tools",
            "tools[0]: function.name `` must be 1-64",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[["function",{"name":"f"}]]}"#,
            "tools",
            "tools[0]: has no `function` object.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"function":["f"]}]}"#,
            "tools",
            "tools[0]: has no `function` object.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":"f","parameters":[]}}]}"#,
            "tools",
            "tools[0]: function.parameters of `f` must be a JSON Schema object, got [].",
        ),
    ]);
}

#[test]
fn of_several_problems_the_first_in_a_fixed_order_is_named() {
    assert_refused(&[
        // Unknown keys first, in the body's order; then messages; then the other fields.
        (
            r#"{"messages":[],"mesages":1}"#,
            "mesages",
            "Unrecognized request argument supplied: mesages",
        ),
        (
            r#"{"foo":1,"presence_penalty":0.5,"messages":[]}"#,
            "foo",
            "Unrecognized request argument supplied: foo",
        ),
        (
            r#"{"presence_penalty":0.5,"foo":1,"messages":[]}"#,
            "presence_penalty",
            "`presence_penalty` is not supported by this server (got 0.5); leave it out.",
        ),
        (
            r#"{"temperature":"hot","messages":[]}"#,
            "messages",
            "`messages` must not be empty.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"temperature":1,"n":12}"#,
            "n",
            "`n` must be from 1 to 8, got 12.",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"logprobs":1,"tool_choice":"sometimes"}"#,
            "tool_choice",
            "got \"sometimes\".",
        ),
        (
            r#"{"messages":[{"role":"user","content":"x"}],"seed":-1,"turn_type":"middle"}"#,
            "turn_type",
            "turn_type must be `main` or `side`, got `middle`",
        ),
    ]);
}

#[test]
fn null_is_as_if_the_key_were_left_out() {
    let plain = json!({"messages": [{"role": "user", "content": "x"}]});
    let mut body = plain.clone();
    for k in [
        "model",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop",
        "seed",
        "tools",
        "tool_choice",
        "n",
        "user",
        "chat_template_kwargs",
        "logprobs",
        "top_logprobs",
        "session_id",
        "turn_type",
        "session_done",
        "frequency_penalty",
        "logit_bias",
        "not_a_parameter",
    ] {
        body[k] = Value::Null;
    }
    assert_eq!(accepted(&body), accepted(&plain));
}

#[test]
fn absent_content_text_parts_body_hints_and_tools_are_read_as_sent() {
    let body = json!({
        "messages": [
            {"role": "system"},
            {"role": "user", "content": null},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": null, "x-trace": 1,
             "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
        ],
        "tools": [{"function": {"name": "f", "parameters": null}, "description": "kept"}],
        "session_id": 42,
        "turn_type": " Side ",
        "session_done": 1,
        "stop": "END"
    });
    let r = accepted(&body);
    let empty = Some(MessageContent::Text(String::new()));
    assert_eq!(r.messages[0].content, empty);
    assert_eq!(r.messages[1].content, empty);
    assert_eq!(r.messages[2].text(), "a\nb");
    assert_eq!(r.messages[3].extra["x-trace"], json!(1));
    let calls = r.messages[3].tool_calls.clone().unwrap();
    assert_eq!(calls[0].function.name, "f");
    assert_eq!(r.tools.as_ref(), Some(&body["tools"]));
    assert_eq!(r.hints.session_id.as_deref(), Some("42"));
    assert_eq!(r.hints.turn_type, Some(TurnType::Side));
    assert!(r.hints.done);
    assert_eq!(r.sampling.stop, ["END"]);
}

#[test]
fn a_bad_turn_type_header_is_named_as_the_header() {
    let body = json!({"messages": [{"role": "user", "content": "x"}], "turn_type": "main"});
    let e = parse(
        body.to_string().as_bytes(),
        &headers(&[("x-turn-type", "middle")]),
    )
    .unwrap_err();
    assert_eq!(e.param.as_deref(), Some("X-Turn-Type"));
    assert!(e.message.contains("got `middle`"), "{}", e.message);
}

#[test]
fn tools_up_to_the_limit_are_offered_and_more_are_refused() {
    let msgs = json!([{"role": "user", "content": "x"}]);
    let tool = json!({"type": "function", "function": {"name": "f"}});
    let mut tools = vec![tool; MAX_TOOLS];
    let r = accepted(&json!({"messages": msgs, "tools": tools}));
    assert_eq!(r.tools, Some(Value::Array(tools.clone())));
    tools.push(tools[0].clone());
    let (param, message) = param_of(json!({"messages": msgs, "tools": tools}));
    assert_eq!(param.as_deref(), Some("tools"));
    assert!(
        message.contains("maximum length 1024, but got an array with length 1025"),
        "{message}"
    );
}

/// The buffer reads OpenAI messages outside requests (trajectory files, plugins' answers):
/// content must read the same in both places.
#[test]
fn content_reads_as_the_buffer_reads_it() {
    for content in [
        json!(null),
        json!("hi"),
        json!([]),
        json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        json!([{"type": "image_url", "image_url": {"url": "x"}}]),
        json!([{"type": "text"}]),
        json!([{"type": "text", "text": 5}]),
        json!([{"type": 5, "text": "a"}]),
        json!([{"text": "a"}]),
        json!(["a"]),
        json!([["text", "a"]]),
        json!([null]),
        json!(5),
        json!({"type": "text", "text": "a"}),
    ] {
        let body = json!({"messages": [{"role": "user", "content": content}]});
        let read = parse(body.to_string().as_bytes(), &HeaderMap::new());
        match content_text(&content) {
            Ok(text) => assert_eq!(read.unwrap().messages[0].text(), text, "{content}"),
            Err(e) => assert_eq!(read.unwrap_err().message, format!("messages[0].{e}")),
        }
    }
}

/// A legacy completions body, parsed.
fn completion(body: Value) -> Result<CompletionRequest, ApiError> {
    parse_completion(body.to_string().as_bytes())
}

#[test]
fn a_completion_prompt_is_text_or_token_ids_as_vllm_takes_it() {
    let text = completion(json!({"prompt": "The owl", "max_tokens": 5, "stream": true})).unwrap();
    assert_eq!(text.prompt, CompletionPrompt::Text("The owl".into()));
    assert_eq!(text.sampling.max_tokens, Some(5));
    assert!(text.stream);
    let ids = completion(json!({"prompt": [1, 2, 3], "top_k": -1, "seed": 7})).unwrap();
    assert_eq!(ids.prompt, CompletionPrompt::Ids(vec![1, 2, 3]));
    assert_eq!((ids.sampling.top_k, ids.sampling.seed), (None, Some(7)));
    // A list of one prompt is that prompt.
    let one = completion(json!({"prompt": ["The owl"]})).unwrap();
    assert_eq!(one.prompt, CompletionPrompt::Text("The owl".into()));
    let one = completion(json!({"prompt": [[4, 5]]})).unwrap();
    assert_eq!(one.prompt, CompletionPrompt::Ids(vec![4, 5]));
    // Neutral values of what is not served are accepted.
    for (k, neutral) in [
        ("echo", json!(false)),
        ("best_of", json!(1)),
        ("suffix", json!("")),
        ("logprobs", json!(null)),
        ("presence_penalty", json!(0)),
        ("n", json!(1)),
    ] {
        let mut body = json!({"prompt": "x"});
        body[k] = neutral;
        assert!(completion(body).is_ok(), "{k}");
    }
}

#[test]
fn a_bad_completion_prompt_or_what_is_not_served_is_refused_by_name() {
    let refused = |body: Value| completion(body).unwrap_err();
    for (body, message) in [
        (json!({}), "Missing required parameter: 'prompt'."),
        (json!({"prompt": null}), "`prompt` must be a string"),
        (json!({"prompt": []}), "`prompt` must not be empty."),
        (json!({"prompt": ["a", "b"]}), "a list of 2 prompts"),
        (json!({"prompt": [[1], [2]]}), "a list of 2 prompts"),
        (json!({"prompt": [1, -2]}), "`prompt[1]` must be a token id"),
        (
            json!({"prompt": [1, 2.5]}),
            "`prompt[1]` must be a token id",
        ),
        (
            json!({"prompt": [1, 4294967296u64]}),
            "`prompt[1]` must be a token id",
        ),
        (
            json!({"prompt": [[1, "a"]]}),
            "`prompt[0][1]` must be a token id",
        ),
        (json!({"prompt": [{"text": "a"}]}), "`prompt[0]` must be"),
    ] {
        let e = refused(body.clone());
        assert_eq!(e.param.as_deref(), Some("prompt"), "{body}");
        assert!(e.message.contains(message), "{body}: {}", e.message);
    }
    for (k, value) in [
        ("echo", json!(true)),
        ("best_of", json!(3)),
        ("suffix", json!("}")),
        ("logprobs", json!(0)),
        ("n", json!(2)),
        ("frequency_penalty", json!(0.5)),
        ("messages", json!([])),
        ("session_id", json!("s")),
    ] {
        let mut body = json!({"prompt": "x"});
        body[k] = value;
        let e = refused(body);
        assert_eq!(e.param.as_deref(), Some(k), "{}", e.message);
    }
    let e = refused(json!({"prompt": "x", "echo": true}));
    assert!(e.message.contains("completion only"), "{}", e.message);
    let e = refused(json!({"prompt": "x", "max_tokens": 0}));
    assert_eq!(e.param.as_deref(), Some("max_tokens"));
    let e = refused(json!({"prompt": "x", "temperature": 3}));
    assert_eq!(e.param.as_deref(), Some("temperature"));
}

#[test]
fn response_format_and_a_forcing_tool_choice_become_the_shape_of_the_reply() {
    let ok = |b: Value| parse(b.to_string().as_bytes(), &HeaderMap::new()).unwrap();
    let msgs = json!([{"role": "user", "content": "x"}]);
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    assert_eq!(ok(json!({"messages": msgs})).shape, None);
    assert_eq!(
        ok(json!({"messages": msgs, "response_format": {"type": "text"}})).shape,
        None
    );
    assert_eq!(
        ok(json!({"messages": msgs, "response_format": {"type": "json_object"}})).shape,
        Some(Shape::JsonObject)
    );
    assert_eq!(
        ok(json!({"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema, "strict": true}}})).shape,
        Some(Shape::JsonSchema(schema.clone()))
    );
    let read = json!({"type": "function", "function": {"name": "read", "parameters": schema}});
    let now = json!({"type": "function", "function": {"name": "now"}});
    let r = ok(json!({"messages": msgs, "tools": [read, now], "tool_choice": "required"}));
    let Some(Shape::ToolCalls { tools, parallel }) = r.shape else {
        panic!("{:?}", r.shape)
    };
    assert!(parallel);
    assert_eq!(tools.len(), 2);
    assert_eq!(
        (tools[0].name.as_str(), &tools[0].parameters),
        ("read", &schema)
    );
    assert_eq!(
        (tools[1].name.as_str(), &tools[1].parameters),
        ("now", &Value::Null)
    );
    assert!(r.tools.is_some(), "the tools still reach the prompt");
    let r = ok(
        json!({"messages": msgs, "tools": [read, now], "tool_choice": "required", "parallel_tool_calls": false}),
    );
    assert!(matches!(
        r.shape,
        Some(Shape::ToolCalls {
            parallel: false,
            ..
        })
    ));
    let r = ok(
        json!({"messages": msgs, "tools": [read, now], "tool_choice": {"type": "function", "function": {"name": "now"}}}),
    );
    let Some(Shape::ToolCalls { tools, parallel }) = r.shape else {
        panic!()
    };
    assert_eq!(
        (tools.len(), tools[0].name.as_str(), parallel),
        (1, "now", false)
    );

    for (body, param, words) in [
        (
            json!({"messages": msgs, "response_format": {"type": "regex"}}),
            "response_format",
            "\"regex\"",
        ),
        (
            json!({"messages": msgs, "response_format": "json"}),
            "response_format",
            "must be an object",
        ),
        (
            json!({"messages": msgs, "response_format": {}}),
            "response_format",
            "no `type`",
        ),
        (
            json!({"messages": msgs, "response_format": {"type": "json_schema"}}),
            "response_format",
            "`schema`",
        ),
        (
            json!({"messages": msgs, "response_format": {"type": "json_schema", "json_schema": {"schema": 3}}}),
            "response_format",
            "JSON Schema object",
        ),
        (
            json!({"messages": msgs, "tools": [read], "tool_choice": "required", "response_format": {"type": "json_object"}}),
            "response_format",
            "cannot be both",
        ),
        (
            json!({"messages": msgs, "tools": [read], "tool_choice": "required", "parallel_tool_calls": "yes"}),
            "parallel_tool_calls",
            "boolean",
        ),
    ] {
        let (p, message) = param_of(body);
        assert_eq!(p.as_deref(), Some(param), "{message}");
        assert!(message.contains(words), "{message}");
    }
}

#[test]
fn n_asks_for_one_to_eight_choices() {
    for n in [1u32, 2, 8] {
        let r = accepted(&json!({"messages": [{"role": "user", "content": "x"}], "n": n}));
        assert_eq!(r.n, n);
    }
    let r = accepted(&json!({"messages": [{"role": "user", "content": "x"}]}));
    assert_eq!(r.n, 1, "one choice when `n` is left out");
}
