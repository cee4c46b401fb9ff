//! Each method's reward asks the judge of the role its prompt has: binary RL's outcome (PRM)
//! prompt goes to `PRM_MODEL_PATH`'s model, distillation's hint prompt to `JUDGE_MODEL_PATH`'s
//! model or the endpoint, and with one judge named, that judge answers both. The plugins are the
//! workspace's, the endpoint a real HTTP server on loopback, the models real (tiny) ones.

mod common;

use axum::routing::{get, post};
use axum::{Json, Router};
use common::{inputs, workspace};
use openclaw_config::backend::Cpu;
use openclaw_judge::{JudgeChoice, Judges};
use openclaw_judging::{HINT_END, HINT_START};
use openclaw_plugin_api::host::{Generation, PolicyService, TokenScores};
use openclaw_plugin_api::{
    HostServices, Message, NextState, SamplingParams, Score, ScoreRequest, ScoreTokens, Turn,
    TurnType,
};
use openclaw_plugins::RunPlugins;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The user's reply to the judged turn.
const CORRECTION: &str = "That is wrong, I wanted a numbered list.";

/// What the endpoint signs its outcome votes with.
const ENDPOINT_VOTE: &str = "ENDPOINT VOTE \\boxed{1}";

/// The prompts an endpoint was asked, by kind.
#[derive(Default, Debug)]
struct Asked {
    outcome: usize,
    hint: usize,
}

/// A real OpenAI-compatible judge server on loopback that counts the prompts it is asked.
fn judge_server() -> (String, Arc<Mutex<Asked>>) {
    let asked = Arc::new(Mutex::new(Asked::default()));
    let state = asked.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route(
                    "/v1/models",
                    get(|| async { Json(json!({"data": [{"id": "judge"}]})) }),
                )
                .route(
                    "/v1/chat/completions",
                    post(move |Json(body): Json<Value>| {
                        let asked = state.clone();
                        async move {
                            let system = body["messages"][0]["content"].as_str().unwrap_or("");
                            let reply = if system.contains("hindsight hints") {
                                asked.lock().unwrap().hint += 1;
                                format!("\\boxed{{1}} {HINT_START}Answer with a numbered list.{HINT_END}")
                            } else {
                                assert!(system.contains("(PRM)"), "{system}");
                                asked.lock().unwrap().outcome += 1;
                                ENDPOINT_VOTE.to_string()
                            };
                            let n = body["n"].as_u64().unwrap_or(1) as usize;
                            let choices: Vec<Value> = (0..n)
                                .map(|_| json!({"message": {"content": reply}}))
                                .collect();
                            Json(json!({ "choices": choices }))
                        }
                    }),
                );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (format!("http://{}/v1", rx.recv().unwrap()), asked)
}

/// The starting policy as `--judge self` is given it, counting the chats it answers.
struct Counting(Arc<dyn PolicyService>, AtomicUsize);

impl PolicyService for Counting {
    fn generate(&self, ids: &[u32], p: &SamplingParams) -> Result<Generation, String> {
        self.0.generate(ids, p)
    }
    fn chat(&self, m: &[Message], tools: &str, p: &SamplingParams) -> Result<Generation, String> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.chat(m, tools, p)
    }
    fn score(&self, r: &ScoreTokens) -> Result<TokenScores, String> {
        self.0.score(r)
    }
    fn render_chat(&self, m: &[Message], tools: &str, add: bool) -> Result<String, String> {
        self.0.render_chat(m, tools, add)
    }
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, String> {
        self.0.tokenize(text)
    }
    fn weight_version(&self) -> u64 {
        self.0.weight_version()
    }
}

/// One turn scored by a method's reward.
struct Scored {
    score: Score,
    /// The `judge:` line the run would log.
    line: String,
    /// Chats the frozen starting policy answered as a judge.
    self_judged: usize,
}

/// Scores one turn of `model` (with a correcting next state) with `method`'s reward plugin,
/// given the judges the run settings `flags` choose.
fn score_one_turn(method: &str, model: &Path, flags: &[(&str, String)]) -> Scored {
    let mut all: Vec<(&str, String)> = vec![
        (
            "plugin",
            workspace()
                .join("methods")
                .join(method)
                .display()
                .to_string(),
        ),
        ("model_path", model.display().to_string()),
        ("majority_vote_n", "2".into()),
        ("judge_max_tokens", "12".into()),
    ];
    all.extend(flags.iter().cloned());
    let plugins = RunPlugins::load(|| inputs(&all)).unwrap();
    let cfg = plugins.resolved.config.clone();
    let policy: Arc<dyn PolicyService> =
        openclaw_policy::policy_engine::<Cpu>(&cfg, &Default::default()).unwrap();
    let choice = JudgeChoice::resolve(&cfg, true, &openclaw_judge::is_classifier).unwrap();
    let frozen = Arc::new(Counting(policy.clone(), AtomicUsize::new(0)));
    let as_judge: Arc<dyn PolicyService> = frozen.clone();
    let judges = Judges::load::<Cpu>(&choice, &cfg, &Default::default(), &mut || {
        Ok(as_judge.clone())
    })
    .unwrap();
    let reward = plugins
        .reward(
            judges
                .give(HostServices::builder())
                .policy(policy.clone())
                .build(),
        )
        .unwrap();
    let prompt = vec![Message::new("user", "Name three fruits.")];
    let sampling = SamplingParams {
        max_tokens: 8,
        seed: Some(1).into(),
        ..Default::default()
    };
    let g = policy.chat(&prompt, "", &sampling).unwrap();
    let turn = Turn {
        session_id: "s".into(),
        turn_index: 0,
        turn_type: TurnType::Main,
        prompt_messages: prompt.into(),
        tools_json: "".into(),
        response: g.message.clone(),
        prompt_ids: g.prompt_ids.clone(),
        response_ids: g.response_ids.clone(),
        response_logprobs: g.logprobs.clone(),
        weight_version: 0,
        next_state: Some(NextState {
            role: "user".into(),
            content: CORRECTION.into(),
            messages: vec![Message::new("user", CORRECTION)].into(),
        })
        .into(),
        trainable: true,
    };
    let score = reward
        .score(&ScoreRequest {
            response_text: g.message.content.clone(),
            turn,
            session_closed: false,
            judge: openclaw_judge::settings(&cfg),
        })
        .unwrap();
    Scored {
        score,
        line: choice.describe(),
        self_judged: frozen.1.load(Ordering::SeqCst),
    }
}

/// The methods, and which prompts each asks: (outcome, hint).
const METHODS: [(&str, bool, bool); 3] = [
    ("binary-rl", true, false),
    ("opd", false, true),
    ("combine", true, true),
];

#[test]
fn prm_model_path_answers_the_outcome_prompt_and_the_endpoint_the_hints() {
    let tmp = tempfile::tempdir().unwrap();
    let model = common::qwen3_tiny(tmp.path());
    for (method, outcome, hint) in METHODS {
        let (url, asked) = judge_server();
        let Scored { score, line, .. } = score_one_turn(
            method,
            &model,
            &[
                ("judge_endpoint", url.clone()),
                ("prm_model_path", model.display().to_string()),
            ],
        );
        let asked = asked.lock().unwrap();
        assert_eq!(
            asked.outcome, 0,
            "{method}: the endpoint got the outcome prompt"
        );
        assert_eq!(asked.hint > 0, hint, "{method}: {asked:?}");
        assert!(
            line.contains("outcome votes (PRM prompt) by the model")
                && line.contains(&format!("hints by the endpoint {url}")),
            "{line}"
        );
        if outcome {
            // The outcome votes are the local model's words (a tiny random model's, seldom a
            // valid vote), not the endpoint's.
            assert!(
                !score.judge_text.contains("ENDPOINT"),
                "{method}: {score:?}"
            );
            assert!(
                !score.judge_text.contains("judge call failed"),
                "{method}: {score:?}"
            );
            assert_eq!(
                score.votes.len() as u32 + score.invalid_votes,
                2,
                "{method}"
            );
        }
        if hint {
            assert!(
                score.hint.is_some(),
                "{method}: the endpoint's hint: {score:?}"
            );
        }
    }
}

#[test]
fn one_judge_named_answers_every_prompt_of_every_method() {
    let tmp = tempfile::tempdir().unwrap();
    let model = common::qwen3_tiny(tmp.path());
    for (method, outcome, hint) in METHODS {
        let (url, asked) = judge_server();
        let Scored { score, line, .. } =
            score_one_turn(method, &model, &[("judge_endpoint", url.clone())]);
        let asked = asked.lock().unwrap();
        assert_eq!(asked.outcome > 0, outcome, "{method}: {asked:?}");
        assert_eq!(asked.hint > 0, hint, "{method}: {asked:?}");
        assert!(
            line.contains(&format!("the endpoint {url} (outcome votes and hints)")),
            "{line}"
        );
        if outcome {
            assert!(score.judge_text.contains("ENDPOINT"), "{method}: {score:?}");
            assert_eq!(score.value, 1.0, "{method}: two votes of +1");
        }
    }
}

#[test]
fn judge_self_is_answered_by_the_starting_policy_for_every_method() {
    let tmp = tempfile::tempdir().unwrap();
    let model = common::qwen3_tiny(tmp.path());
    for (method, _, _) in METHODS {
        let s = score_one_turn(method, &model, &[("judge", "self".into())]);
        // Two votes, outcome or hint: each one a chat of the frozen policy.
        assert!(s.self_judged >= 2, "{method}: {}", s.self_judged);
        assert_eq!(
            s.line,
            "judge: the starting policy, frozen (--judge self) (outcome votes and hints)"
        );
    }
}

#[test]
fn a_run_on_a_model_of_its_own_names_its_judge_or_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let model = openclaw_lab::default_model::ensure_default_model(&dir.join("home"), false)
        .unwrap()
        .display()
        .to_string();
    let plugin = workspace().join("methods/binary-rl").display().to_string();
    let port = "0".to_string();
    let args = [
        "run",
        "--plugin",
        &plugin,
        "--model-path",
        &model,
        "--max-steps",
        "1",
        "--port",
        &port,
        "--simulate-users",
        "4",
        "--rollout-batch-size",
        "4",
    ];
    let o = common::run_host(dir, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    for choice in [
        "--judge-model-path",
        "--judge-endpoint",
        "--judge self",
        "--judge rule",
    ] {
        assert!(err.contains(choice), "{err}");
    }
    assert!(
        !dir.join("rl_buffer").exists()
            || std::fs::read_dir(dir.join("rl_buffer"))
                .unwrap()
                .next()
                .is_none()
    );

    let mut with_rule = args.to_vec();
    with_rule.extend(["--judge", "rule"]);
    let o = common::run_host(dir, &with_rule);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("stopped after step 1"),
        "it trains a step: {err}"
    );
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("judge: ")).collect();
    assert_eq!(
        lines,
        ["judge: the keyword rules (--judge rule) (outcome votes and hints)"],
        "{err}"
    );
}
