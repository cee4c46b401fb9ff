//! Chat templates rendered the way transformers' `apply_chat_template` renders them.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, Result};
use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde_json::{Map, Value as Json};

use crate::config::TokenizerConfig;
use crate::message::ChatMessage;
use crate::pyjson::{self, DumpOptions};
use crate::tools::{tool_list, tools_in_messages, ToolsRoute};

/// Per-request rendering options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderOptions {
    /// Append the header of a new assistant turn (`<|im_start|>assistant\n`).
    pub add_generation_prompt: bool,
    /// Passed as `enable_thinking` when set (Qwen3: `false` adds an empty think block).
    pub enable_thinking: Option<bool>,
    /// Further template variables (a request's `chat_template_kwargs`); they override the
    /// special-token variables, as in transformers, but not the fields above or `messages`.
    pub extra: Map<String, Json>,
}

/// A compiled chat template plus the special-token variables it may use.
#[derive(Clone)]
pub struct ChatTemplate {
    env: Arc<Environment<'static>>,
    name: String,
    /// Templates by name; `default` is the one used unless tools are given and a
    /// `tool_use` template exists (transformers' rule).
    has_tool_use: bool,
    special_tokens: Map<String, Json>,
    /// Found on first use with tools (rendering the probe costs a moment) and shared by clones.
    tools_route: Arc<OnceLock<ToolsRoute>>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

const DEFAULT: &str = "default";
const TOOL_USE: &str = "tool_use";

/// The name of the tool that [`ChatTemplate::tools_route`] renders: one no template writes on
/// its own, so finding it in the prompt means the template wrote the tools.
const PROBE_TOOL: &str = "openclaw_probe_tool_5f3a9c";

impl ChatTemplate {
    /// Loads the template of a checkpoint directory: `chat_template.jinja` when present,
    /// else `chat_template` of `tokenizer_config.json`; special tokens from the latter.
    pub fn from_dir(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let config_path = dir.join("tokenizer_config.json");
        let config = TokenizerConfig::from_dir_or_default(dir)?;
        let jinja_path = dir.join("chat_template.jinja");
        if jinja_path.is_file() {
            let source = std::fs::read_to_string(&jinja_path)
                .map_err(|e| anyhow!("cannot read {}: {e}", jinja_path.display()))?;
            let name = jinja_path.display().to_string();
            return Ok(Self::from_source(&name, &source)?.with_config(&config));
        }
        if config.chat_templates.is_empty() {
            return Err(anyhow!(
                "no chat template in {}: neither chat_template.jinja nor a chat_template in {}",
                dir.display(),
                config_path.display()
            ));
        }
        let name = format!("chat_template of {}", config_path.display());
        Self::from_named(&name, &config.chat_templates).map(|t| t.with_config(&config))
    }

    /// Compiles one template; `name` appears in error messages.
    pub fn from_source(name: &str, source: &str) -> Result<Self> {
        Self::from_named(name, &[(DEFAULT.to_owned(), source.to_owned())])
    }

    /// Compiles named templates (the list form of `chat_template`); one must be `default`.
    fn from_named(name: &str, templates: &[(String, String)]) -> Result<Self> {
        if !templates.iter().any(|(n, _)| n == DEFAULT) {
            let names: Vec<&str> = templates.iter().map(|(n, _)| n.as_str()).collect();
            return Err(anyhow!(
                "{name}: several chat templates ({}) and none named \"default\"",
                names.join(", ")
            ));
        }
        let mut env = new_environment();
        for (tname, source) in templates {
            env.add_template_owned(tname.clone(), hf_compatible_source(source))
                .map_err(|e| {
                    anyhow!("{name}: cannot compile template {tname}: {}", one_line(&e))
                })?;
        }
        Ok(Self {
            env: Arc::new(env),
            name: name.to_owned(),
            has_tool_use: templates.iter().any(|(n, _)| n == TOOL_USE),
            special_tokens: Map::new(),
            tools_route: Arc::default(),
        })
    }

    /// Sets `bos_token`, `eos_token`, `pad_token` and `unk_token` from a tokenizer config.
    pub fn with_config(mut self, config: &TokenizerConfig) -> Self {
        let mut set = |key: &str, value: &Option<String>| {
            if let Some(v) = value {
                self.special_tokens
                    .insert(key.into(), Json::String(v.clone()));
            }
        };
        set("bos_token", &config.bos_token);
        set("eos_token", &config.eos_token);
        set("pad_token", &config.pad_token);
        set("unk_token", &config.unk_token);
        // What the template renders may depend on the special tokens: probe again.
        self.tools_route = Arc::default();
        self
    }

    /// The name used in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How tools reach the model through this template: its own tools section when it writes
    /// the tools it is given, else the system prompt. Found once, by rendering a user message
    /// with one tool of a name no template writes on its own (`PROBE_TOOL`) and looking for
    /// that name in the prompt.
    pub fn tools_route(&self) -> ToolsRoute {
        *self.tools_route.get_or_init(|| {
            let tools = serde_json::json!([{"type": "function", "function": {
                "name": PROBE_TOOL,
                "description": "Finds out whether the chat template writes its tools.",
                "parameters": {"type": "object", "properties": {}}}}]);
            let options = RenderOptions {
                add_generation_prompt: true,
                ..Default::default()
            };
            match self.render_as_given(&[ChatMessage::new("user", "Hi.")], Some(&tools), &options) {
                Ok(prompt) if prompt.contains(PROBE_TOOL) => ToolsRoute::Template,
                Ok(_) => ToolsRoute::SystemPrompt,
                // A template that refuses this conversation with tools is left as it is: the
                // real conversation gets the template's own error, which says why.
                Err(_) => ToolsRoute::Template,
            }
        })
    }

    /// Renders a conversation. `tools` is the request's `tools` array: passed to the template
    /// as given when the template writes tools ([`ToolsRoute::Template`]); otherwise, when it
    /// lists any tool, written into the system prompt, with the conversation's tool calls and
    /// results written into its messages, in the format of Qwen's templates (see
    /// [`crate::tools_system_prompt`]), and the template renders that without `tools`. Either
    /// way the model is asked for `<tool_call>` blocks, which [`crate::OutputParser`] reads.
    pub fn render(
        &self,
        messages: &[ChatMessage],
        tools: Option<&Json>,
        options: &RenderOptions,
    ) -> Result<String> {
        if let Some(listed) = tools.filter(|t| !tool_list(t).is_empty()) {
            if self.tools_route() == ToolsRoute::SystemPrompt {
                let messages = tools_in_messages(messages, listed)
                    .map_err(|e| anyhow!("{}: {e:#}", self.name))?;
                return self.render_as_given(&messages, None, options);
            }
        }
        self.render_as_given(messages, tools, options)
    }

    /// Renders a conversation with `tools` passed to the template as given.
    fn render_as_given(
        &self,
        messages: &[ChatMessage],
        tools: Option<&Json>,
        options: &RenderOptions,
    ) -> Result<String> {
        // Later inserts win: special tokens < extra kwargs < explicit options < the
        // conversation itself (transformers refuses kwargs named like the latter).
        let mut ctx = self.special_tokens.clone();
        for (k, v) in &options.extra {
            ctx.insert(k.clone(), v.clone());
        }
        if let Some(thinking) = options.enable_thinking {
            ctx.insert("enable_thinking".into(), Json::Bool(thinking));
        }
        let messages: Vec<Json> = messages
            .iter()
            .map(ChatMessage::to_template_value)
            .collect();
        ctx.insert("messages".into(), Json::Array(messages));
        ctx.insert("tools".into(), tools.cloned().unwrap_or(Json::Null));
        ctx.insert("documents".into(), Json::Null);
        ctx.insert(
            "add_generation_prompt".into(),
            Json::Bool(options.add_generation_prompt),
        );
        let which = if tools.is_some() && self.has_tool_use {
            TOOL_USE
        } else {
            DEFAULT
        };
        let template = self
            .env
            .get_template(which)
            .map_err(|e| anyhow!("{}: {}", self.name, one_line(&e)))?;
        template
            .render(Value::from(Serde(&ctx)))
            .map_err(|e| anyhow!("rendering {}: {}", self.name, one_line(&e)))
    }
}

/// minijinja configured like transformers' sandboxed Jinja2 environment.
fn new_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(false)
            .build()
            .expect("default delimiters are valid"),
    );
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_filter("tojson", tojson);
    env.add_function("raise_exception", raise_exception);
    env.add_function("strftime_now", strftime_now);
    // `{{ none }}` prints `None`, `{{ true }}` prints `True`, as Python does.
    env.set_formatter(|out, state, value| match pyjson::python_str(value) {
        Some(s) => out.write_str(&s).map_err(Error::from),
        None => minijinja::escape_formatter(out, state, value),
    });
    env
}

/// transformers' `tojson`: `json.dumps(x, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`, positional arguments in that order.
fn tojson(
    value: &Value,
    ensure_ascii: Option<Value>,
    indent: Option<Value>,
    separators: Option<Value>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let ensure_ascii = match ensure_ascii {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("ensure_ascii")?,
    };
    let indent = match indent {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    let separators = match separators {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("separators")?,
    };
    let sort_keys: Option<Value> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;

    let mut o = DumpOptions {
        ensure_ascii: ensure_ascii.is_some_and(|v| v.is_true()),
        sort_keys: sort_keys.is_some_and(|v| v.is_true()),
        ..Default::default()
    };
    o.indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.kind() {
            ValueKind::String => v.as_str().unwrap_or_default().to_owned(),
            ValueKind::Number => " ".repeat(i64::try_from(v)?.max(0) as usize),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: indent must be an int or a string, not {other}"),
                ))
            }
        }),
    };
    // json.dumps uses "," between items when indenting, ", " otherwise.
    if o.indent.is_some() {
        o.item_separator = ",".into();
    }
    if let Some(seps) = separators.filter(|v| !v.is_none()) {
        let parts: Vec<Value> = seps.try_iter()?.collect();
        match parts.as_slice() {
            [item, key] if item.as_str().is_some() && key.as_str().is_some() => {
                o.item_separator = item.as_str().unwrap_or_default().to_owned();
                o.key_separator = key.as_str().unwrap_or_default().to_owned();
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "tojson: separators must be a pair of strings",
                ))
            }
        }
    }
    Ok(Value::from(pyjson::dumps(value, &o)?))
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn strftime_now(format: String) -> Result<Value, Error> {
    Ok(Value::from(strftime::format_now(&format)))
}

/// transformers registers a `{% generation %}...{% endgeneration %}` tag that only marks
/// assistant spans; minijinja has no custom tags, so it becomes an always-true `if` with the
/// same whitespace control.
fn hf_compatible_source(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let (lead, body) = split_ws_control(inner, true);
        let (body, trail) = split_ws_control(body, false);
        let replaced = match body.trim() {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        match replaced {
            Some(r) => {
                out.push_str("{%");
                out.push_str(lead);
                out.push(' ');
                out.push_str(r);
                out.push(' ');
                out.push_str(trail);
                out.push_str("%}");
            }
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Splits a leading (or trailing) `-` / `+` whitespace-control marker off a tag body.
fn split_ws_control(s: &str, leading: bool) -> (&str, &str) {
    if leading {
        match s.chars().next() {
            Some(c @ ('-' | '+')) => s.split_at(c.len_utf8()),
            _ => ("", s),
        }
    } else {
        match s.chars().last() {
            Some(c @ ('-' | '+')) => s.split_at(s.len() - c.len_utf8()),
            _ => (s, ""),
        }
    }
}

/// minijinja errors carry a kind, a detail and a location; keep them on one line.
fn one_line(e: &Error) -> String {
    let mut s = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Just enough of C's `strftime` for chat templates (`%d %b %Y` and friends), in UTC.
mod strftime {
    use std::time::{SystemTime, UNIX_EPOCH};

    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];

    pub(super) fn format_now(format: &str) -> String {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        format_unix(format, secs)
    }

    /// Formats seconds since the Unix epoch (UTC).
    pub(super) fn format_unix(format: &str, secs: i64) -> String {
        let days = secs.div_euclid(86_400);
        let tod = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        let (hour, minute, second) = (tod / 3600, tod / 60 % 60, tod % 60);
        // 1970-01-01 was a Thursday (index 3 with Monday = 0).
        let weekday = (days + 3).rem_euclid(7) as usize;
        let yday = days - days_from_civil(year, 1, 1) + 1;
        let month_name = MONTHS[(month - 1) as usize];
        let day_name = DAYS[weekday];
        let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };

        let mut out = String::new();
        let mut chars = format.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('Y') => out.push_str(&year.to_string()),
                Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
                Some('m') => out.push_str(&format!("{month:02}")),
                Some('d') => out.push_str(&format!("{day:02}")),
                Some('e') => out.push_str(&format!("{day:>2}")),
                Some('j') => out.push_str(&format!("{yday:03}")),
                Some('H') => out.push_str(&format!("{hour:02}")),
                Some('I') => out.push_str(&format!("{hour12:02}")),
                Some('M') => out.push_str(&format!("{minute:02}")),
                Some('S') => out.push_str(&format!("{second:02}")),
                Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
                Some('B') => out.push_str(month_name),
                Some('b') | Some('h') => out.push_str(&month_name[..3]),
                Some('A') => out.push_str(day_name),
                Some('a') => out.push_str(&day_name[..3]),
                Some('u') => out.push_str(&(weekday + 1).to_string()),
                Some('w') => out.push_str(&((weekday + 1) % 7).to_string()),
                Some('F') => out.push_str(&format!("{year}-{month:02}-{day:02}")),
                Some('T') => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
                Some('D') => {
                    out.push_str(&format!("{month:02}/{day:02}/{:02}", year.rem_euclid(100)))
                }
                Some('Z') => out.push_str("UTC"),
                Some('z') => out.push_str("+0000"),
                Some('%') => out.push('%'),
                Some(other) => {
                    out.push('%');
                    out.push(other);
                }
                None => out.push('%'),
            }
        }
        out
    }

    /// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
    fn civil_from_days(z: i64) -> (i64, i64, i64) {
        let z = z + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + i64::from(m <= 2);
        (y, m, d)
    }

    fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y.rem_euclid(400);
        let mp = if m > 2 { m - 3 } else { m + 9 };
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn formats_dates() {
            // 2024-02-29 13:05:09 UTC, a Thursday.
            let t = 1_709_211_909;
            assert_eq!(
                super::format_unix("%d %b %Y %H:%M:%S %A %j %I%p %%", t),
                "29 Feb 2024 13:05:09 Thursday 060 01PM %"
            );
            assert_eq!(super::format_unix("%B %e, %y", 0), "January  1, 70");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(source: &str, messages: &[ChatMessage], tools: Option<&Json>) -> Result<String> {
        ChatTemplate::from_source("test", source)?.render(
            messages,
            tools,
            &RenderOptions::default(),
        )
    }

    #[test]
    fn tojson_matches_python() {
        let tools = json!([{"name": "f", "d": "<a & 'b'> é", "x": 1.0, "y": [1e-5, null]}]);
        let out = render("{{ tools[0] | tojson }}", &[], Some(&tools)).unwrap();
        assert_eq!(
            out,
            r#"{"name": "f", "d": "<a & 'b'> é", "x": 1.0, "y": [1e-05, null]}"#
        );
        let out = render(
            "{{ tools[0] | tojson(indent=2, sort_keys=true) }}",
            &[],
            Some(&tools),
        )
        .unwrap();
        assert!(out.starts_with("{\n  \"d\": "), "{out}");
        let out = render(
            "{{ tools[0].y | tojson(separators=(',', ':')) }}",
            &[],
            Some(&tools),
        )
        .unwrap();
        assert_eq!(out, "[1e-05,null]");
        let out = render("{{ tools[0].d | tojson(true) }}", &[], Some(&tools)).unwrap();
        assert_eq!(out, r#""<a & 'b'> \u00e9""#);
    }

    #[test]
    fn python_printing_and_methods() {
        let msgs = [ChatMessage::new("user", "  Hello World  ")];
        let src = "{{ none }} {{ true }} {{ 1e-5 }} {{ messages[0].content.strip().lower() }} \
                   {{ messages[0].content.split()|length }} {{ messages[::-1][0].role }}";
        assert_eq!(
            render(src, &msgs, None).unwrap(),
            "None True 1e-05 hello world 2 user"
        );
    }

    #[test]
    fn raise_exception_is_one_line() {
        let err = render(
            "{% if messages|length == 0 %}{{ raise_exception('Need at least\none message') }}{% endif %}",
            &[],
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("rendering test: "), "{err}");
        assert!(err.contains("Need at least one message"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn syntax_errors_name_the_template() {
        let err = ChatTemplate::from_source("my template", "{% if %}")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("my template: cannot compile"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn generation_tags_and_namespace_and_loop_controls() {
        let msgs = [
            ChatMessage::new("user", "a"),
            ChatMessage::new("assistant", "b"),
            ChatMessage::new("user", "c"),
        ];
        let src = "{%- set ns = namespace(n=0) -%}\
                   {%- for m in messages -%}\
                   {%- if m.role == 'user' %}{% set ns.n = ns.n + 1 %}{% continue %}{% endif -%}\
                   {%- generation -%}[{{ m.content }}]{%- endgeneration -%}\
                   {%- if loop.index > 5 %}{% break %}{% endif -%}\
                   {%- endfor -%}{{ ns.n }}{{ strftime_now('%Y')|length }}";
        assert_eq!(render(src, &msgs, None).unwrap(), "[b]24");
    }

    #[test]
    fn enable_thinking_only_when_given() {
        let t = ChatTemplate::from_source(
            "t",
            "{% if enable_thinking is defined %}{{ enable_thinking }}{% else %}unset{% endif %}",
        )
        .unwrap();
        let mut o = RenderOptions::default();
        assert_eq!(t.render(&[], None, &o).unwrap(), "unset");
        o.enable_thinking = Some(false);
        assert_eq!(t.render(&[], None, &o).unwrap(), "False");
        // Extra kwargs reach the template but cannot replace the explicit options.
        o.extra.insert("enable_thinking".into(), json!(true));
        assert_eq!(t.render(&[], None, &o).unwrap(), "False");
        o.enable_thinking = None;
        assert_eq!(t.render(&[], None, &o).unwrap(), "True");
    }

    #[test]
    fn named_templates_pick_tool_use_with_tools() {
        let t = ChatTemplate::from_named(
            "t",
            &[
                ("default".into(), "D".into()),
                ("tool_use".into(), "T".into()),
            ],
        )
        .unwrap();
        let o = RenderOptions::default();
        assert_eq!(t.render(&[], None, &o).unwrap(), "D");
        assert_eq!(t.render(&[], Some(&json!([])), &o).unwrap(), "T");
        assert!(ChatTemplate::from_named("t", &[("x".into(), "X".into())]).is_err());
    }

    #[test]
    fn missing_template_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tokenizer_config.json"), "{}").unwrap();
        let err = ChatTemplate::from_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no chat template"), "{err}");
        std::fs::write(dir.path().join("chat_template.jinja"), "J{{ eos_token }}").unwrap();
        std::fs::write(
            dir.path().join("tokenizer_config.json"),
            r#"{"chat_template": "C", "eos_token": {"content": "</s>"}}"#,
        )
        .unwrap();
        let t = ChatTemplate::from_dir(dir.path()).unwrap();
        assert_eq!(
            t.render(&[], None, &RenderOptions::default()).unwrap(),
            "J</s>"
        );
    }
}
