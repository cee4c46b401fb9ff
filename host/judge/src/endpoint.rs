//! A judge served by any OpenAI-compatible server (`--judge-endpoint URL`): the user judges
//! with a model they already serve (vLLM, SGLang, llama.cpp, a hosted API).

use openclaw_plugin_api::host::JudgeService;
use openclaw_plugin_api::{JudgeRequest, Message};
use serde_json::{json, Value};
use std::time::Duration;

/// Settings of an endpoint judge.
#[derive(Clone, Debug)]
pub struct EndpointOptions {
    /// The API base, e.g. `http://127.0.0.1:30000/v1` (a trailing `/chat/completions` is cut).
    pub base_url: String,
    /// Sent as `Authorization: Bearer ...` when not empty.
    pub api_key: String,
    /// The model id; empty means the first one `GET /models` lists.
    pub model: String,
    /// Per-call timeout.
    pub timeout: Duration,
}

/// A judge that calls an OpenAI-compatible `/chat/completions`.
pub struct EndpointJudge {
    opts: EndpointOptions,
    agent: ureq::Agent,
    model: String,
}

fn base(url: &str) -> String {
    url.trim_end_matches('/')
        .trim_end_matches("/chat/completions")
        .trim_end_matches('/')
        .to_string()
}

impl EndpointJudge {
    /// Connects: resolves the model id (asking the server when none is given).
    pub fn new(opts: EndpointOptions) -> anyhow::Result<Self> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(opts.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let mut judge = EndpointJudge {
            model: opts.model.clone(),
            opts,
            agent,
        };
        if judge.model.is_empty() {
            judge.model = judge.first_model()?;
        }
        Ok(judge)
    }

    /// The model id in use.
    pub fn model(&self) -> &str {
        &self.model
    }

    fn first_model(&self) -> anyhow::Result<String> {
        let url = format!("{}/models", base(&self.opts.base_url));
        let v = self.get_json(&url).map_err(|e| {
            anyhow::anyhow!("judge endpoint {url}: {e} (give --judge-model to skip this)")
        })?;
        v["data"][0]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                anyhow::anyhow!("judge endpoint {url} lists no model (give --judge-model)")
            })
    }

    fn get_json(&self, url: &str) -> Result<Value, String> {
        let mut req = self.agent.get(url);
        if !self.opts.api_key.is_empty() {
            req = req.header("Authorization", &format!("Bearer {}", self.opts.api_key));
        }
        let mut resp = req.call().map_err(|e| e.to_string())?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!(
                "HTTP {status}: {}",
                text.chars().take(200).collect::<String>()
            ));
        }
        serde_json::from_str(&text).map_err(|e| format!("invalid JSON ({e})"))
    }

    fn call(&self, messages: &[Value], req: &JudgeRequest, n: u32) -> Result<Vec<String>, String> {
        let url = format!("{}/chat/completions", base(&self.opts.base_url));
        let body = json!({
            "model": self.model,
            "messages": messages,
            "temperature": req.sampling.temperature,
            "top_p": req.sampling.top_p,
            "max_tokens": req.sampling.max_tokens,
            "n": n,
            "stream": false,
        });
        let mut r = self
            .agent
            .post(&url)
            .header("Content-Type", "application/json");
        if !self.opts.api_key.is_empty() {
            r = r.header("Authorization", &format!("Bearer {}", self.opts.api_key));
        }
        let mut resp = r
            .send(body.to_string())
            .map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{url}: {e}"))?;
        if !status.is_success() {
            return Err(format!(
                "{url}: HTTP {status}: {}",
                text.chars().take(200).collect::<String>()
            ));
        }
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{url}: the reply is not JSON ({e})"))?;
        let choices = v["choices"]
            .as_array()
            .ok_or_else(|| format!("{url}: the reply has no choices"))?;
        choices
            .iter()
            .map(|c| {
                c["message"]["content"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{url}: a choice has no message content"))
            })
            .collect()
    }
}

impl JudgeService for EndpointJudge {
    fn complete(&self, req: &JudgeRequest) -> Result<Vec<Result<String, String>>, String> {
        let messages: Vec<Value> = req
            .messages
            .iter()
            .map(|m: &Message| json!({"role": m.role.as_str(), "content": m.content.as_str()}))
            .collect();
        let want = req.n.max(1) as usize;
        let mut out: Vec<Result<String, String>> = Vec::with_capacity(want);
        // Servers that ignore `n` return one choice: ask again for the rest, one at a time.
        let mut first = true;
        while out.len() < want {
            let n = if first { want - out.len() } else { 1 };
            first = false;
            match self.call(&messages, req, n as u32) {
                Ok(texts) if texts.is_empty() => out.push(Err("the reply has no choices".into())),
                Ok(texts) => out.extend(texts.into_iter().take(want - out.len()).map(Ok)),
                Err(e) => out.push(Err(e)),
            }
        }
        // No vote at all is a failed call, not a set of invalid votes: the pool retries it,
        // counts it, and the turn is judged again later instead of scoring as untrainable.
        if out.iter().all(Result::is_err) {
            let first = out
                .into_iter()
                .find_map(Result::err)
                .unwrap_or_else(|| "no completions".into());
            return Err(format!("the judge endpoint gave no vote: {first}"));
        }
        Ok(out)
    }

    fn classify(&self, _text: &str) -> Result<Vec<f32>, String> {
        Err(
            "an OpenAI-compatible endpoint cannot run a sequence classifier; give --prm-model-path"
                .into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::extract::State;
    use axum::routing::{get, post};
    use axum::{Json, Router};
    use openclaw_plugin_api::SamplingParams;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A real HTTP server on loopback whose behaviour depends on the last user message.
    fn serve() -> (String, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let state = calls.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = Router::new()
                    .route("/v1/models", get(|| async { Json(json!({"data": [{"id": "judge-7b"}]})) }))
                    .route(
                        "/v1/chat/completions",
                        post(|State(calls): State<Arc<AtomicUsize>>, Json(body): Json<Value>| async move {
                            calls.fetch_add(1, Ordering::SeqCst);
                            let last = body["messages"].as_array().unwrap().last().unwrap()["content"]
                                .as_str()
                                .unwrap()
                                .to_string();
                            assert_eq!(body["model"], "judge-7b");
                            match last.as_str() {
                                "fail" => Err((axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom")),
                                "slow" => {
                                    tokio::time::sleep(Duration::from_secs(3)).await;
                                    Ok(Json(json!({"choices": []})))
                                }
                                "garbage" => Ok(Json(json!({"oops": true}))),
                                "one" => Ok(Json(json!({"choices": [{"message": {"content": "\\boxed{1}"}}]}))),
                                _ => {
                                    let n = body["n"].as_u64().unwrap() as usize;
                                    let choices: Vec<Value> = (0..n)
                                        .map(|i| json!({"message": {"content": format!("vote {i} \\boxed{{-1}}")}}))
                                        .collect();
                                    Ok(Json(json!({"choices": choices})))
                                }
                            }
                        }),
                    )
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        (format!("http://{addr}/v1"), calls)
    }

    fn request(text: &str, n: u32) -> JudgeRequest {
        JudgeRequest {
            messages: vec![Message::new("user", text)].into(),
            sampling: SamplingParams::default(),
            n,
        }
    }

    #[test]
    fn votes_timeouts_errors_and_servers_that_ignore_n() {
        let (url, calls) = serve();
        let judge = EndpointJudge::new(EndpointOptions {
            base_url: url.clone(),
            api_key: "k".into(),
            model: String::new(),
            timeout: Duration::from_millis(800),
        })
        .unwrap();
        assert_eq!(judge.model(), "judge-7b");

        let votes = judge.complete(&request("judge this", 3)).unwrap();
        assert_eq!(votes.len(), 3);
        assert!(votes
            .iter()
            .all(|v| v.as_ref().unwrap().contains("\\boxed{-1}")));

        // A server that ignores n: the rest are asked one by one.
        let before = calls.load(Ordering::SeqCst);
        let votes = judge.complete(&request("one", 3)).unwrap();
        assert_eq!(votes.len(), 3);
        assert_eq!(calls.load(Ordering::SeqCst) - before, 3);

        for (what, expect) in [
            ("fail", "HTTP 500"),
            ("garbage", "no choices"),
            ("slow", ""),
        ] {
            let e = judge.complete(&request(what, 2)).unwrap_err();
            assert!(
                e.contains("gave no vote") && e.contains(expect),
                "{what}: {e}"
            );
        }

        let e = EndpointJudge::new(EndpointOptions {
            base_url: "http://127.0.0.1:9/v1".into(),
            api_key: String::new(),
            model: String::new(),
            timeout: Duration::from_millis(300),
        })
        .err()
        .unwrap();
        assert!(
            e.to_string()
                .contains("judge endpoint http://127.0.0.1:9/v1/models"),
            "{e}"
        );
    }
}
