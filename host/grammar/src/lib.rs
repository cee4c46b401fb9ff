//! Structured outputs: what a request demands of its reply (`response_format` `json_object` or
//! `json_schema`, `tool_choice` `required` or one named function) as a grammar, and that
//! grammar as the engine's [`Constraint`]: at each step the tokens whose bytes keep the reply
//! inside the grammar, then the end-of-turn tokens once it is complete.
//!
//! The grammar engine is llguidance (the one vLLM and SGLang use). It needs each token's bytes,
//! which [`Grammars::new`] reads from the tokenizer once per model; a request's grammar is
//! compiled when the request arrives ([`Grammars::compile`]), so a schema it cannot follow is
//! refused before anything is generated.

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use openclaw_chat::Tokenizer;
use openclaw_engine::generate::{Allowed, Constraint, ConstraintFactory};
use serde_json::{json, Value};

/// What a reply must be.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// Any JSON object (`response_format: {"type": "json_object"}`).
    JsonObject,
    /// A JSON value valid under this schema (`response_format: {"type": "json_schema"}`).
    JsonSchema(Value),
    /// Tool calls in the Hermes format the output parser reads (`<tool_call>` blocks), each
    /// naming one of `tools` with arguments valid under its parameters; one call, or several
    /// when `parallel`.
    ToolCalls {
        /// The functions a call may name.
        tools: Vec<Function>,
        /// Whether more than one call may follow the first.
        parallel: bool,
    },
}

/// A function a forced tool call may name.
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// The JSON schema of its arguments (an object schema; `{}` takes any object).
    pub parameters: Value,
}

impl Shape {
    /// The short name a recorded turn keeps of what constrained it.
    pub fn kind(&self) -> &'static str {
        match self {
            Shape::JsonObject => "json_object",
            Shape::JsonSchema(_) => "json_schema",
            Shape::ToolCalls { .. } => "tool_call",
        }
    }

    /// The grammar in llguidance's terms.
    fn grammar(&self) -> Result<TopLevelGrammar> {
        Ok(match self {
            Shape::JsonObject => {
                TopLevelGrammar::from_json_schema(compact(json!({"type": "object"})))
            }
            Shape::JsonSchema(schema) => {
                TopLevelGrammar::from_json_schema(compact(closed(schema.clone())))
            }
            Shape::ToolCalls { tools, parallel } => {
                if tools.is_empty() {
                    bail!("no tools to call");
                }
                // One object per tool: its name fixed, its arguments under its parameters, in
                // the key order of the format the model was taught (Qwen's template).
                let calls: Vec<Value> = tools
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        // The tool's schema sits at `/anyOf/i/properties/arguments` of the whole
                        // grammar's: its local references are moved there with it.
                        let mut arguments = closed(arguments_schema(&f.parameters));
                        rebase_refs(&mut arguments, &format!("#/anyOf/{i}/properties/arguments"));
                        json!({
                            "type": "object",
                            "properties": {
                                "name": {"const": f.name},
                                "arguments": arguments,
                            },
                            "required": ["name", "arguments"],
                            "additionalProperties": false,
                        })
                    })
                    .collect();
                let body = compact(json!({ "anyOf": calls }));
                // Lark: the tags are text, as the output parser reads them (a tokenizer that
                // has them as single tokens still spells them; the canonical tokenization
                // is what the model is steered toward).
                let repeat = if *parallel { " (\"\\n\" call)*" } else { "" };
                let lark = format!(
                    "start: call{repeat}\ncall: \"<tool_call>\\n\" body \"\\n</tool_call>\"\nbody: %json {}\n",
                    serde_json::to_string(&body)?
                );
                TopLevelGrammar::from_lark(lark)
            }
        })
    }
}

/// A tool's parameters as the schema of its arguments: an absent or empty schema takes any
/// object, as OpenAI's does.
fn arguments_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Null => json!({"type": "object"}),
        Value::Object(m) if m.is_empty() => json!({"type": "object"}),
        p => p.clone(),
    }
}

/// `schema` with every object schema that names its properties and says nothing of others
/// closed to them (`additionalProperties: false`), as vLLM's default grammar engine (xgrammar's
/// strict mode) reads schemas: JSON Schema would allow any other key, and a model that wanders
/// into one writes keys and values nobody asked for (LangChain's tool schemas leave it out).
fn closed(mut schema: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if m.get("properties").is_some_and(Value::is_object)
                    && !m.contains_key("additionalProperties")
                    && !m.contains_key("patternProperties")
                {
                    m.insert("additionalProperties".into(), Value::Bool(false));
                }
                for (k, v) in m.iter_mut() {
                    if !DATA_KEYWORDS.contains(&k.as_str()) {
                        walk(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut schema);
    schema
}

/// Points every local `$ref` of a schema (`#`, `#/$defs/X`, ...) to the same place under
/// `base`, where the schema now sits inside a larger one. Other references are left alone.
fn rebase_refs(schema: &mut Value, base: &str) {
    match schema {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match (k.as_str(), &*v) {
                    ("$ref", Value::String(r)) if r.starts_with('#') => {
                        *v = Value::String(format!("{base}{}", &r[1..]));
                    }
                    (k, _) if DATA_KEYWORDS.contains(&k) => {}
                    _ => rebase_refs(v, base),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rebase_refs(v, base)),
        _ => {}
    }
}

/// Keywords whose values are JSON data, not schemas: nothing inside them is rewritten.
const DATA_KEYWORDS: &[&str] = &["const", "enum", "default", "examples"];

/// `schema` with JSON written as `json.dumps` writes it (`": "` and `", "`, no other
/// whitespace): a model may otherwise spend its tokens on whitespace the grammar allows.
fn compact(mut schema: Value) -> Value {
    if let Value::Object(m) = &mut schema {
        let opts = m.entry("x-guidance").or_insert_with(|| json!({}));
        if let Value::Object(o) = opts {
            o.entry("whitespace_flexible").or_insert(json!(false));
            o.entry("key_separator").or_insert(json!(": "));
            o.entry("item_separator").or_insert(json!(", "));
        }
        schema
    } else {
        // `true` / `false` schemas.
        json!({"allOf": [schema], "x-guidance": {"whitespace_flexible": false, "key_separator": ": ", "item_separator": ", "}})
    }
}

/// One model's grammar engine: its tokens' bytes and llguidance's precomputed tables.
pub struct Grammars {
    factory: Arc<ParserFactory>,
    ends: Vec<u32>,
}

impl std::fmt::Debug for Grammars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grammars")
            .field("ends", &self.ends)
            .finish()
    }
}

/// The tokenizer as llguidance sees it.
struct Env {
    trie: TokTrie,
    tokenizer: Tokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        // llguidance tokenizes only text it will force; bytes that are not UTF-8 fall back to
        // its own greedy tokenization.
        self.trie.tokenize_with_greedy_fallback(s, |text| {
            self.tokenizer.encode(text, false).unwrap_or_default()
        })
    }

    fn tokenize_is_canonical(&self) -> bool {
        true
    }
}

impl Grammars {
    /// The grammar engine of a model whose logits have `logits` entries, with `tokenizer`, whose
    /// turns end with any of `ends`. Reads every token's bytes and builds llguidance's tables
    /// (a fraction of a second for a 50k vocabulary).
    pub fn new(tokenizer: &Tokenizer, logits: usize, ends: &[u32]) -> Result<Self> {
        let Some(&eos) = ends.first() else {
            bail!("the model has no end-of-turn token, so a grammar could not end its reply");
        };
        let text = tokenizer
            .inner()
            .to_string(false)
            .map_err(|e| anyhow!("cannot read the tokenizer: {e}"))?;
        let json: Value = serde_json::from_str(&text).context("the tokenizer's JSON")?;
        let mut words = llguidance::token_bytes_from_tokenizer_json(&json)
            .context("the tokens' bytes, for grammars")?;
        if words.len() > logits {
            bail!(
                "the tokenizer has {} tokens but the model only {} logits",
                words.len(),
                logits
            );
        }
        // Ids the model has logits for but the tokenizer never makes: special, so no text
        // grammar allows them.
        let unmade = |i: usize| {
            let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
            w.extend(format!("<[{i}]>").bytes());
            w
        };
        for (i, w) in words.iter_mut().enumerate() {
            if w.is_empty() {
                *w = unmade(i);
            }
        }
        while words.len() < logits {
            words.push(unmade(words.len()));
        }
        let info = TokRxInfo::new(logits as u32, eos);
        let trie = TokTrie::from(&info, &words).with_eos_tokens(ends);
        let env: TokEnv = Arc::new(Env {
            trie,
            tokenizer: tokenizer.clone(),
        });
        let mut factory = ParserFactory::new_simple(&env)?;
        factory.quiet();
        Ok(Grammars {
            factory: Arc::new(factory),
            ends: ends.to_vec(),
        })
    }

    /// The constraint of a reply of `shape`, compiled now: a schema llguidance cannot follow
    /// is an error naming the problem.
    pub fn compile(&self, shape: &Shape) -> Result<Arc<dyn ConstraintFactory>> {
        let grammar = shape.grammar()?;
        let matcher = Matcher::new(self.factory.create_parser(grammar));
        if let Some(e) = matcher.get_error() {
            bail!("{e}");
        }
        Ok(Arc::new(Compiled {
            matcher,
            ends: self.ends.clone(),
        }))
    }
}

/// A compiled grammar: each sequence starts from a copy of its start state.
struct Compiled {
    matcher: Matcher,
    ends: Vec<u32>,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compiled grammar")
    }
}

impl ConstraintFactory for Compiled {
    fn start(&self) -> Result<Box<dyn Constraint>> {
        Ok(Box::new(Running {
            matcher: self.matcher.deep_clone(),
            ends: self.ends.clone(),
        }))
    }
}

/// One sequence's grammar state.
struct Running {
    matcher: Matcher,
    ends: Vec<u32>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Running grammar")
    }
}

impl Constraint for Running {
    fn allowed(&mut self) -> Result<Allowed> {
        if let Some(e) = self.matcher.get_error() {
            bail!("{e}");
        }
        if self.matcher.is_stopped() {
            return Ok(Allowed::Only(self.ends.clone()));
        }
        let mask = self.matcher.compute_mask()?;
        let mut ids = Vec::with_capacity(mask.num_set());
        mask.iter_set_entries(|i| ids.push(i as u32));
        Ok(Allowed::Only(ids))
    }

    fn accept(&mut self, token: u32) -> Result<()> {
        if self.matcher.is_stopped() && self.ends.contains(&token) {
            return Ok(());
        }
        self.matcher.consume_token(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in model's tokenizer (a byte-level BPE of 1,608 tokens), with its logits.
    fn builtin() -> (Tokenizer, Grammars) {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../lab/assets/default-model");
        let tok = Tokenizer::from_dir(dir).unwrap();
        let end = tok.token_to_id("<|im_end|>").unwrap();
        let g = Grammars::new(&tok, 1614, &[end]).unwrap();
        (tok, g)
    }

    /// Walks `shape`'s grammar with tokens drawn at random among those allowed; returns the text
    /// and whether it ended.
    fn walk(tok: &Tokenizer, g: &Grammars, shape: &Shape, seed: u64) -> (String, bool) {
        let mut c = g.compile(shape).unwrap().start().unwrap();
        let end = tok.token_to_id("<|im_end|>").unwrap();
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
        let mut ids = Vec::new();
        for _ in 0..400 {
            let Allowed::Only(allowed) = c.allowed().unwrap() else {
                panic!("a grammar allows only some tokens")
            };
            assert!(!allowed.is_empty());
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Where the grammar may end or go on, either, by a coin.
            if allowed.contains(&end) && (allowed.len() == 1 || (state >> 40).is_multiple_of(2)) {
                return (tok.decode(&ids, false).unwrap(), true);
            }
            let allowed: Vec<u32> = allowed.into_iter().filter(|&t| t != end).collect();
            let t = allowed[(state >> 33) as usize % allowed.len()];
            c.accept(t).unwrap();
            ids.push(t);
        }
        (tok.decode(&ids, false).unwrap(), false)
    }

    #[test]
    fn every_walk_through_a_schema_is_json_valid_under_it() {
        let (tok, g) = builtin();
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 8},
                "days": {"type": "integer", "minimum": 0, "maximum": 99},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "days", "unit"],
            "additionalProperties": false,
        });
        let mut ended = 0;
        for seed in 0..20 {
            let (text, done) = walk(&tok, &g, &Shape::JsonSchema(schema.clone()), seed);
            if !done {
                continue;
            }
            ended += 1;
            let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
            assert_eq!(keys, ["city", "days", "unit"], "{text}");
            assert!(v["city"].as_str().unwrap().chars().count() <= 8, "{text}");
            assert!((0..=99).contains(&v["days"].as_i64().unwrap()), "{text}");
            assert!(["celsius", "fahrenheit"].contains(&v["unit"].as_str().unwrap()));
            // Written as json.dumps writes it.
            assert!(text.starts_with("{\"city\": \""), "{text}");
        }
        assert!(ended >= 15, "only {ended} of 20 walks ended");
    }

    #[test]
    fn a_json_object_is_any_object_and_nothing_else() {
        let (tok, g) = builtin();
        for seed in 0..10 {
            let (text, done) = walk(&tok, &g, &Shape::JsonObject, seed);
            assert!(text.starts_with('{'), "{text}");
            if done {
                let v: Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                assert!(v.is_object());
            }
        }
    }

    #[test]
    fn a_forced_tool_call_names_a_given_function_with_valid_arguments() {
        let (tok, g) = builtin();
        let tools = vec![
            Function {
                name: "get_weather".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 6}},
                    "required": ["city"],
                    "additionalProperties": false,
                }),
            },
            Function {
                name: "now".into(),
                // No arguments (an object naming no properties is closed to others).
                parameters: json!({"type": "object", "properties": {}}),
            },
        ];
        let mut names = std::collections::BTreeSet::new();
        let mut several = 0;
        for seed in 0..24 {
            let parallel = seed % 2 == 1;
            let shape = Shape::ToolCalls {
                tools: tools.clone(),
                parallel,
            };
            let (text, done) = walk(&tok, &g, &shape, seed);
            if !done {
                continue;
            }
            let parsed = openclaw_chat::OutputParser::parse(&text, Default::default());
            if parallel {
                assert!(!parsed.tool_calls.is_empty(), "{text}");
                several += usize::from(parsed.tool_calls.len() > 1);
            } else {
                assert_eq!(parsed.tool_calls.len(), 1, "{text}");
            }
            assert!(
                parsed.content.trim().is_empty(),
                "nothing but calls: {text}"
            );
            let call = &parsed.tool_calls[0];
            names.insert(call.name.clone());
            let args: Value = serde_json::from_str(&call.arguments).unwrap();
            if call.name == "get_weather" {
                assert!(args["city"].is_string(), "{text}");
            } else {
                assert_eq!(call.name, "now");
                assert!(args.is_object());
            }
        }
        assert_eq!(names.len(), 2, "both tools were called: {names:?}");
        assert!(several > 0, "parallel calls allow more than one");
    }

    #[test]
    fn objects_that_name_their_properties_take_no_others_unless_they_say_so() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"b": {"type": "integer"}}},
                "c": {"type": "object", "properties": {}, "additionalProperties": true},
            },
            "$defs": {"d": {"properties": {"e": {"type": "string"}}}},
        });
        let c = closed(schema);
        assert_eq!(c["additionalProperties"], false);
        assert_eq!(c["properties"]["a"]["additionalProperties"], false);
        assert_eq!(c["properties"]["c"]["additionalProperties"], true);
        assert_eq!(c["$defs"]["d"]["additionalProperties"], false);
        // Walks through a schema with an open object: every walk ends with the named keys only.
        let (tok, g) = builtin();
        let shape = Shape::JsonSchema(json!({
            "type": "object",
            "properties": {"ok": {"type": "boolean"}},
            "required": ["ok"],
        }));
        for seed in 0..10 {
            let (text, done) = walk(&tok, &g, &shape, seed);
            assert!(done, "{text}");
            let v: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v.as_object().unwrap().len(), 1, "{text}");
        }
    }

    #[test]
    fn a_tool_whose_parameters_refer_to_their_own_definitions_can_be_forced() {
        let (tok, g) = builtin();
        let tools = vec![
            Function {
                name: "other".into(),
                parameters: json!({"type": "object", "properties": {}}),
            },
            Function {
                name: "book".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"when": {"$ref": "#/$defs/Day"}},
                    "required": ["when"],
                    "$defs": {"Day": {"enum": ["mon", "tue"]}},
                }),
            },
        ];
        let shape = Shape::ToolCalls {
            tools,
            parallel: false,
        };
        let mut booked = 0;
        for seed in 0..12 {
            let (text, done) = walk(&tok, &g, &shape, seed);
            assert!(done, "{text}");
            let parsed = openclaw_chat::OutputParser::parse(&text, Default::default());
            let call = &parsed.tool_calls[0];
            if call.name == "book" {
                booked += 1;
                let args: Value = serde_json::from_str(&call.arguments).unwrap();
                assert!(
                    ["mon", "tue"].contains(&args["when"].as_str().unwrap()),
                    "{text}"
                );
            }
        }
        assert!(booked > 0);
        // Data is not schema: a constant that looks like one is kept as it is.
        let c = closed(json!({"const": {"properties": {"a": 1}}}));
        assert_eq!(c, json!({"const": {"properties": {"a": 1}}}));
    }

    #[test]
    fn a_schema_that_cannot_be_followed_is_refused_by_name() {
        let (_, g) = builtin();
        let bad = Shape::JsonSchema(
            json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}),
        );
        let e = g.compile(&bad).expect_err("refused").to_string();
        assert!(e.contains("nowhere"), "{e}");
    }
}
