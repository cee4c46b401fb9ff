//! The server with real clients: the `openai` npm package and the Python `openai` package
//! against `openclaw-host serve` on loopback, a real (tiny, random) model, and the durable
//! buffer checked afterwards. `.ci/run` installs both clients first.

mod common;

use common::{host_command, spawn_listening, workspace};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A tiny random model with a tokenizer trained on a little English.
fn tiny_model(dir: &Path) -> PathBuf {
    let words = "the a shark owl lives in the sea and eats fish three fruits are apple banana cherry gravity is the force that pulls objects thanks that helps list files here";
    let corpus: String = (0..400)
        .map(|i| {
            let w: Vec<&str> = words.split(' ').collect();
            (0..10)
                .map(|j| w[(i * 7 + j * 3) % w.len()])
                .collect::<Vec<_>>()
                .join(" ")
                + "\n"
        })
        .collect();
    common::tiny_model(dir, &corpus, 600)
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(model: &Path, buffer: &Path, extra: &[&str]) -> Server {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = model.parent().unwrap().join(format!("serve-{n}.err"));
    let (child, url) = spawn_listening(
        host_command(model.parent().unwrap())
            .arg("serve")
            .arg("--model-path")
            .arg(model)
            .args(["--port", "0", "--rl-buffer-dir"])
            .arg(buffer)
            .args(extra)
            .stdout(Stdio::null()),
        &log,
        Duration::from_secs(60),
    );
    Server { child, url }
}

fn export(buffer: &Path) -> Vec<Value> {
    let o = host_command(buffer.parent().unwrap())
        .args(["buffer", "export", "--rl-buffer-dir"])
        .arg(buffer)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_client(cmd: &mut Command, server: &Server) -> Value {
    let o = cmd
        .env("OPENCLAW_BASE_URL", format!("{}/v1", server.url))
        .env("OPENCLAW_API_KEY", "test-key")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8(o.stdout).unwrap();
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

/// The client scripts' folder, once the npm `package` they import is installed there.
fn npm_clients(package: &str) -> PathBuf {
    let clients = workspace().join("tests/clients");
    assert!(
        clients.join("node_modules").join(package).is_dir(),
        "the npm package {package} is not installed: run `npm install --prefix tests/clients` (as .ci/run does)"
    );
    clients
}

#[test]
fn npm_and_python_openai_clients_work_and_every_turn_is_recorded() {
    let clients = npm_clients("openai");
    let python = common::python();
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &["--api-key", "test-key"]);

    // No key, wrong key.
    let r = ureq::get(&format!("{}/v1/models", server.url))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .unwrap();
    assert_eq!(r.status(), 401);

    let js = run_client(
        Command::new("node").arg(clients.join("stream.mjs")),
        &server,
    );
    assert!(js["stream"]["chunks"].as_u64().unwrap() >= 3, "{js}");
    assert!(
        js["first"]["usage"]["completion_tokens"].as_u64().unwrap() >= 1,
        "{js}"
    );
    assert!(
        ["length", "stop"].contains(&js["second"]["finish_reason"].as_str().unwrap()),
        "{js}"
    );
    assert_eq!(js["error"]["status"], 404, "{js}");
    assert_eq!(js["error"]["code"], "model_not_found", "{js}");

    let py = run_client(
        Command::new(&python).arg(clients.join("client.py")),
        &server,
    );
    assert!(
        py["plain"]["completion_tokens"].as_u64().unwrap() >= 1,
        "{py}"
    );
    assert!(py["stream"]["chunks"].as_u64().unwrap() >= 3, "{py}");
    // The model id is the model directory's name; `default` is accepted too.
    assert_eq!(py["models"][0], "model");

    drop(server);
    let sessions = export(&buffer);
    // The tool round trip: one session, the tool result is the first turn's next state.
    let tools = sessions
        .iter()
        .find(|s| s["session_id"] == "tools-1")
        .expect("the tool session");
    let turns = tools["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["next_state"]["role"], "tool");
    assert_eq!(turns[0]["next_state"]["content"], "a.txt b.txt");
    assert_eq!(turns[1]["prompt"][3]["role"], "tool");
    for t in turns {
        let ids = t["response_ids"].as_array().unwrap();
        assert_eq!(ids.len(), t["response_logprobs"].as_array().unwrap().len());
        assert!(!ids.is_empty());
    }
    // The header-less conversation continued by echoing the reply is one session.
    let owl = sessions
        .iter()
        .find(|s| s["turns"][0]["prompt"][0]["content"] == "Describe the owl.")
        .expect("the owl session");
    assert_eq!(owl["turns"].as_array().unwrap().len(), 2, "{owl}");
    assert_eq!(
        owl["turns"][0]["next_state"]["content"],
        "Thanks, that helps a lot."
    );
}

#[test]
fn bad_requests_get_the_right_answers_and_the_server_keeps_serving() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &["--max-body-bytes", "12000000"]);
    let post = |body: &[u8]| {
        let mut r = ureq::post(&format!("{}/v1/chat/completions", server.url))
            .config()
            .http_status_as_error(false)
            .build()
            .header("content-type", "application/json")
            .send(body)
            .unwrap();
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        )
    };
    let ok = br#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":3}"#;
    let (s, v) = post(ok);
    assert_eq!(s, 200, "{v}");

    let (s, v) = post(b"{not json");
    assert_eq!(
        (s, v["error"]["type"].as_str()),
        (400, Some("invalid_request_error"))
    );
    let (s, v) = post(br#"{"mesages":[]}"#);
    assert_eq!(s, 400);
    assert_eq!(v["error"]["param"], "mesages");
    let (s, v) = post(br#"{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}"#);
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    let (s, v) = post(br#"{"messages":[{"role":"user","content":"hi"}],"session_id":"../../etc"}"#);
    assert_eq!(s, 400, "{v}");
    // `user` names an end user, any string.
    let (s, v) = post(
        br#"{"messages":[{"role":"user","content":"hi"}],"user":"John Smith","max_tokens":2}"#,
    );
    assert_eq!(s, 200, "{v}");
    // A completion budget the context cannot hold: vLLM's 400.
    let (s, v) = post(br#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000000}"#);
    assert_eq!(
        (s, v["error"]["code"].as_str(), v["error"]["param"].as_str()),
        (400, Some("context_length_exceeded"), Some("max_tokens")),
        "{v}"
    );
    // Penalties this server does not implement are refused by name.
    let (s, v) = post(br#"{"messages":[{"role":"user","content":"hi"}],"presence_penalty":0.5}"#);
    assert_eq!(
        (s, v["error"]["param"].as_str()),
        (400, Some("presence_penalty")),
        "{v}"
    );
    // A body over the limit: the server answers once it has read past the limit, while the
    // client is still sending.
    let conn = std::net::TcpStream::connect(server.url.trim_start_matches("http://")).unwrap();
    let mut writer = conn.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "a".repeat(13_000_000)
        );
        let head = format!("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n", body.len());
        let _ = writer.write_all(head.as_bytes());
        let _ = writer.write_all(body.as_bytes()); // may fail once the server has answered
    });
    let mut reader = conn;
    reader
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = reader.read_to_end(&mut answer);
    let _ = sender.join();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("request_too_large"), "{answer}");
    // A message far longer than the model's context (10 MB of words).
    let long = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "shark fish ".repeat(1_000_000)
    );
    let (s, v) = post(long.as_bytes());
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (400, Some("context_length_exceeded")),
        "{v}"
    );

    // A client that disconnects mid-stream.
    let mut stream =
        std::net::TcpStream::connect(server.url.trim_start_matches("http://")).unwrap();
    let body = br#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":200,"stream":true}"#;
    write!(stream, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
    stream.write_all(body).unwrap();
    let mut first = [0u8; 64];
    let _ = stream.read(&mut first);
    drop(stream);

    // Still serving.
    for _ in 0..3 {
        let (s, v) = post(ok);
        assert_eq!(s, 200, "{v}");
    }
    let r = ureq::get(&format!("{}/metrics", server.url))
        .call()
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap();
    assert!(r.contains("openclaw_requests_total"), "{r}");
    assert!(r.contains("openclaw_ttft_seconds"), "{r}");
}

/// A chat completion's whole response body (an SSE stream when the body asks for one).
fn chat(server: &Server, body: &Value) -> String {
    ureq::post(&format!("{}/v1/chat/completions", server.url))
        .send_json(body)
        .unwrap()
        .into_body()
        .read_to_string()
        .unwrap()
}

/// The first seed under 20 for which `say` gives a reply of a few plain words, with the reply.
fn seed_with_words<T>(say: impl Fn(u64) -> Option<(String, T)>) -> (u64, String, T) {
    (0..20)
        .find_map(|seed| {
            let (text, extra) = say(seed)?;
            (words(&text).len() >= 4).then_some((seed, text, extra))
        })
        .expect("the tiny model says a few words for some seed")
}

/// Reads an SSE body into the concatenated content and the last finish reason.
fn read_stream(body: &str) -> (String, String) {
    let mut content = String::new();
    let mut finish = String::new();
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let v: Value = serde_json::from_str(data).unwrap();
        let choice = &v["choices"][0];
        if let Some(t) = choice["delta"]["content"].as_str() {
            content.push_str(t);
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_string();
        }
    }
    (content, finish)
}

/// The plain words of a reply (a random model also writes stray bytes).
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 3)
        .collect()
}

#[test]
fn a_stop_string_ends_the_reply_before_it_streamed_or_not() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let server = start(&model, &tmp.path().join("rl_buffer"), &[]);
    // Sampling with a fixed seed repeats itself exactly (greedy decoding of a random model
    // repeats one byte token).
    let ask = |seed: u64, stop: Option<&str>, stream: bool| -> String {
        let mut body = serde_json::json!({
            "messages": [{"role": "user", "content": "Describe the owl."}],
            "max_tokens": 40, "temperature": 1, "seed": seed, "stream": stream,
        });
        if let Some(s) = stop {
            body["stop"] = serde_json::json!([s]);
        }
        chat(&server, &body)
    };
    // A seed for which the model says a few words when nothing stops it.
    let (seed, text, full) = seed_with_words(|seed| {
        let full: Value = serde_json::from_str(&ask(seed, None, false)).unwrap();
        let text = full["choices"][0]["message"]["content"]
            .as_str()?
            .to_string();
        Some((text, full))
    });
    // A stop string from the second half of that reply.
    let words = words(&text);
    let stop = words[words.len() / 2];
    let before = &text[..text.find(stop).unwrap()];

    let cut: Value = serde_json::from_str(&ask(seed, Some(stop), false)).unwrap();
    let shown = cut["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(
        shown.trim_end(),
        before.trim_end(),
        "stop {stop:?} in {text:?}"
    );
    assert!(!shown.contains(stop), "{shown:?}");
    assert_eq!(cut["choices"][0]["finish_reason"], "stop");
    assert!(
        cut["usage"]["completion_tokens"].as_u64() < full["usage"]["completion_tokens"].as_u64(),
        "generation ended at the stop string: {cut}"
    );

    let (streamed, finish) = read_stream(&ask(seed, Some(stop), true));
    assert_eq!(
        streamed.trim_end(),
        before.trim_end(),
        "stop {stop:?} in {text:?}"
    );
    assert_eq!(finish, "stop");
}

#[test]
fn a_stop_string_ends_what_plugins_generate_too() {
    use openclaw_config::backend::Cpu;
    use openclaw_metrics::Metrics;
    use openclaw_plugin_api::host::PolicyService;
    use openclaw_plugin_api::{Message, SamplingParams};
    use openclaw_policy::{ModelFiles, PolicyEngine, SchedulerOptions};

    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let files = ModelFiles::<Cpu>::load_path(&model, &Default::default()).unwrap();
    let opts = SchedulerOptions {
        max_batch: 4,
        max_inflight: 8,
        prefix_cache: Default::default(),
    };
    let engine = PolicyEngine::start(files, 0, opts, std::sync::Arc::new(Metrics::new()));
    let user = [Message::new("user", "Describe the owl.")];
    let generate = |seed: u64, stop: Option<&str>| {
        let params = SamplingParams {
            max_tokens: 40,
            seed: abi_stable::std_types::ROption::RSome(seed),
            stop: stop.map(|s| vec![s.into()].into()).unwrap_or_default(),
            ..Default::default()
        };
        engine.chat(&user, "", &params).unwrap()
    };
    let (seed, text, ()) =
        seed_with_words(|seed| Some((generate(seed, None).message.content.to_string(), ())));
    let stop = words(&text)[words(&text).len() / 2].to_string();
    let before = &text[..text.find(&stop).unwrap()];
    let cut = generate(seed, Some(&stop));
    assert_eq!(
        cut.message.content.trim_end(),
        before.trim_end(),
        "{stop:?} in {text:?}"
    );
    assert_eq!(cut.finish_reason.as_str(), "stop");
}

/// The key and admission are checked before the body is read, and admission covers the whole
/// request.
#[test]
fn refusals_come_before_the_body_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let server = start(
        &model,
        &tmp.path().join("rl_buffer"),
        &[
            "--api-key",
            "k",
            "--max-inflight",
            "1",
            "--max-body-bytes",
            "30000000",
        ],
    );
    let addr = server.url.trim_start_matches("http://").to_string();
    // Headers announcing 20 MB and no body at all: a wrong key is answered at once.
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: bearer wrong\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 401");
    drop(conn);

    // One request in flight (a long stream); the next one is refused before its body.
    let mut first = std::net::TcpStream::connect(&addr).unwrap();
    let body = br#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":1000,"stream":true}"#;
    write!(first, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: BEARER k\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()).unwrap();
    first.write_all(body).unwrap();
    let mut started = [0u8; 12];
    first.read_exact(&mut started).unwrap();
    assert_eq!(&started, b"HTTP/1.1 200");
    let mut second = std::net::TcpStream::connect(&addr).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(second, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 20000000\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    second.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 429");
    drop(first);
    drop(second);

    // Once the stream's client is gone its admission is released.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = ureq::post(&format!("{}/v1/chat/completions", server.url))
            .header("authorization", "Bearer k")
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(serde_json::json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}))
            .unwrap();
        if r.status() == 200 {
            break;
        }
        assert_eq!(r.status(), 429);
        assert!(
            Instant::now() < deadline,
            "the admission was never released"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `logprobs` and `top_logprobs` as OpenAI answers them: one entry per sampled token, its
/// alternatives most likely first, the same numbers the buffer records for training.
#[test]
fn logprobs_are_answered_as_openai_does_and_match_the_recorded_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &[]);
    let ask = |stream: bool| -> String {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": "Describe the owl."}],
            "max_tokens": 6, "temperature": 0, "logprobs": true, "top_logprobs": 3,
            "stream": stream, "session_id": if stream { "lp-stream" } else { "lp-plain" },
        });
        chat(&server, &body)
    };
    let plain: Value = serde_json::from_str(&ask(false)).unwrap();
    let content = plain["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap();
    assert_eq!(
        content.len() as u64,
        plain["usage"]["completion_tokens"].as_u64().unwrap()
    );
    for e in content {
        let lp = e["logprob"].as_f64().unwrap();
        assert!(lp <= 0.0, "{e}");
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3, "{e}");
        let tops: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(tops.windows(2).all(|w| w[0] >= w[1]), "{tops:?}");
        // Greedy: the sampled token is the most likely one.
        assert_eq!(top[0]["token"], e["token"], "{e}");
        assert!((tops[0] - lp).abs() < 1e-6);
        assert!(e["bytes"].is_array());
    }
    // Streaming: the entries come with the chunks, as many in all.
    let streamed: usize = ask(true)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| {
            let v: Value = serde_json::from_str(d).unwrap();
            v["choices"][0]["logprobs"]["content"]
                .as_array()
                .map_or(0, Vec::len)
        })
        .sum();
    assert_eq!(streamed, content.len());
    drop(server);
    // The buffer holds the same logprobs for training.
    let recorded = export(&buffer)
        .into_iter()
        .find(|s| s["session_id"] == "lp-plain")
        .expect("the session");
    let recorded: Vec<f64> = recorded["turns"][0]["response_logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let answered: Vec<f64> = content
        .iter()
        .map(|e| e["logprob"].as_f64().unwrap())
        .collect();
    assert_eq!(recorded.len(), answered.len());
    for (a, b) in recorded.iter().zip(&answered) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}

/// `/v1/completions` as vLLM answers it: a prompt of text or token ids, whole or streamed as
/// `text_completion` chunks, bad token ids and what is not served refused by name, nothing
/// recorded; and `/v1/models/{id}` for the served id, an alias and an unknown id, behind the
/// key like the rest of `/v1`.
#[test]
fn legacy_completions_and_one_model_are_answered_as_vllm_does() {
    use serde_json::json;
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &["--api-key", "k"]);
    let call = |request: ureq::RequestBuilder<ureq::typestate::WithBody>, body: Value| {
        let mut r = request
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(body)
            .unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap_or_default())
    };
    let post = |body: Value| {
        call(
            ureq::post(&format!("{}/v1/completions", server.url))
                .header("authorization", "Bearer k"),
            body,
        )
    };
    let get = |path: &str, key: &str| {
        let mut r = ureq::get(&format!("{}{path}", server.url))
            .header("authorization", &format!("Bearer {key}"))
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .unwrap();
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
        )
    };
    let refused = |body: Value| {
        let (s, text) = post(body.clone());
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!(s, 400, "{body}: {text}");
        v["error"].clone()
    };

    // One model by its id, by an alias (answered with the served id), and an unknown one.
    let (s, m) = get("/v1/models/model", "k");
    assert_eq!(s, 200, "{m}");
    assert_eq!(
        (m["id"].as_str(), m["object"].as_str()),
        (Some("model"), Some("model"))
    );
    let context = m["max_model_len"].as_u64().unwrap() as usize;
    let (s, m) = get("/v1/models/default", "k");
    assert_eq!((s, m["id"].as_str()), (200, Some("model")), "{m}");
    for unknown in ["/v1/models/gpt-4", "/v1/models/org/gpt-4"] {
        let (s, e) = get(unknown, "k");
        assert_eq!(
            (s, e["error"]["code"].as_str()),
            (404, Some("model_not_found")),
            "{e}"
        );
    }
    let (s, _) = get("/v1/models/model", "wrong");
    assert_eq!(s, 401);
    let (s, _) = call(
        ureq::post(&format!("{}/v1/completions", server.url)),
        json!({"prompt": "The owl"}),
    );
    assert_eq!(s, 401);

    // A text prompt, whole.
    let greedy =
        json!({"model": "model", "prompt": "The owl lives in", "max_tokens": 8, "temperature": 0});
    let (s, text) = post(greedy.clone());
    assert_eq!(s, 200, "{text}");
    let whole: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(whole["object"], "text_completion", "{whole}");
    assert_eq!(whole["model"], "model");
    assert!(
        whole["id"].as_str().unwrap().starts_with("cmpl-"),
        "{whole}"
    );
    let choice = &whole["choices"][0];
    let finish = choice["finish_reason"].as_str().unwrap();
    assert!(["length", "stop"].contains(&finish), "{whole}");
    let completion_tokens = whole["usage"]["completion_tokens"].as_u64().unwrap();
    assert!((1..=8).contains(&completion_tokens), "{whole}");
    assert!(
        whole["usage"]["prompt_tokens"].as_u64().unwrap() >= 1,
        "{whole}"
    );

    // The same, streamed: the same text in `text_completion` chunks, then usage and [DONE].
    let mut streamed = greedy.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (s, body) = post(streamed);
    assert_eq!(s, 200, "{body}");
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let (mut text, mut last_finish) = (String::new(), None);
    for c in &chunks {
        assert_eq!(c["object"], "text_completion", "{c}");
        if let Some(choice) = c["choices"].get(0) {
            text.push_str(choice["text"].as_str().unwrap());
            if let Some(f) = choice["finish_reason"].as_str() {
                last_finish = Some(f.to_string());
            }
        }
    }
    assert_eq!(text, choice["text"].as_str().unwrap(), "{body}");
    assert_eq!(last_finish.as_deref(), Some(finish), "{body}");
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], completion_tokens, "{body}");

    // Token ids, as vLLM takes them, plain or as a list of one prompt.
    let ids = json!([5, 17, 42, 99]);
    let (s, text) = post(json!({"prompt": ids, "max_tokens": 4, "temperature": 0}));
    assert_eq!(s, 200, "{text}");
    let plain: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(plain["usage"]["prompt_tokens"], 4, "{plain}");
    let (s, text) = post(json!({"prompt": [ids], "max_tokens": 4, "temperature": 0}));
    assert_eq!(s, 200, "{text}");
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(listed["choices"][0]["text"], plain["choices"][0]["text"]);

    // A token id outside the vocabulary, a prompt past the context, and what is not served.
    let e = refused(json!({"prompt": [5, 100000]}));
    assert_eq!(e["param"], "prompt", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("100000") && message.contains("position 1"),
        "{e}"
    );
    let e = refused(json!({"prompt": vec![5; context]}));
    assert_eq!(
        (e["param"].as_str(), e["code"].as_str()),
        (Some("prompt"), Some("context_length_exceeded")),
        "{e}"
    );
    let e = refused(json!({"prompt": [5, 17], "max_tokens": context}));
    assert_eq!(
        (e["param"].as_str(), e["code"].as_str()),
        (Some("max_tokens"), Some("context_length_exceeded")),
        "{e}"
    );
    for (k, value) in [
        ("echo", json!(true)),
        ("best_of", json!(2)),
        ("suffix", json!("x")),
        ("logprobs", json!(1)),
        ("n", json!(2)),
    ] {
        let mut body = json!({"prompt": "The owl"});
        body[k] = value;
        let e = refused(body);
        assert_eq!(e["param"], k, "{e}");
    }
    let e = refused(json!({"prompt": ["The owl", "The shark"]}));
    assert_eq!(e["param"], "prompt", "{e}");
    let (s, text) = post(json!({"model": "gpt-x", "prompt": "The owl"}));
    assert_eq!(s, 404, "{text}");

    // Completions have no session: nothing was recorded.
    drop(server);
    assert_eq!(export(&buffer), Vec::<Value>::new());
}

/// A request log line per request at info level, with method, path, status, time and (for
/// chat) tokens, never the content or the key; the public-bind warning said once, naming the
/// variable that sets the key.
#[test]
fn every_request_gets_one_log_line_without_its_content_or_key() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let log = tmp.path().join("access.err");
    let (child, url) = spawn_listening(
        host_command(tmp.path())
            .arg("serve")
            .arg("--model-path")
            .arg(&model)
            .args(["--port", "0", "--api-key", "sk-private-9"])
            .arg("--rl-buffer-dir")
            .arg(tmp.path().join("rl_buffer"))
            .env("RUST_LOG", "openclaw_server::access=info")
            .stdout(Stdio::null()),
        &log,
        Duration::from_secs(60),
    );
    let server = Server { child, url };
    let post = |body: Value, key: &str| {
        ureq::post(&format!("{}/v1/chat/completions", server.url))
            .header("authorization", &format!("Bearer {key}"))
            .config()
            .http_status_as_error(false)
            .build()
            .send_json(body)
            .unwrap()
            .into_body()
            .read_to_string()
            .unwrap()
    };
    let secret = "the owl keeps a secret";
    post(
        serde_json::json!({"messages": [{"role": "user", "content": secret}], "max_tokens": 3}),
        "sk-private-9",
    );
    post(
        serde_json::json!({"messages": [{"role": "user", "content": secret}], "max_tokens": 3, "stream": true}),
        "sk-private-9",
    );
    post(
        serde_json::json!({"messages": [{"role": "user", "content": secret}]}),
        "wrong-key",
    );
    ureq::get(&format!("{}/healthz", server.url))
        .call()
        .unwrap();
    // The stream's line is written when it ends, after its last event reached the client.
    // Lines before the first chat are the start's readiness checks.
    let ours = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("openclaw_server::access"))
            .skip_while(|l| l.contains("GET /healthz"))
            .map(str::to_string)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        let done =
            ours(&text).iter().any(|l| l.contains("GET /healthz")) && text.contains(" stream ");
        if done || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let lines = ours(&text);
    assert_eq!(lines.len(), 4, "{text}");
    let chat: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("POST /v1/chat/completions 200"))
        .collect();
    assert_eq!(chat.len(), 2, "{text}");
    for l in &chat {
        assert!(
            l.contains(" ms, ")
                && l.contains(" prompt + ")
                && l.contains(" completion tokens, session "),
            "{l}"
        );
    }
    assert_eq!(
        chat.iter().filter(|l| l.contains("200 stream")).count(),
        1,
        "{text}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("POST /v1/chat/completions 401")),
        "{text}"
    );
    assert!(
        lines.iter().any(|l| l.contains("GET /healthz 200")),
        "{text}"
    );
    assert!(
        !text.contains("owl") && !text.contains("sk-private-9"),
        "{text}"
    );
    drop(server);

    // Bound to every address without a key: warned about once, naming the variable.
    let log = tmp.path().join("open.err");
    let (child, url) = spawn_listening(
        host_command(tmp.path())
            .arg("serve")
            .arg("--model-path")
            .arg(&model)
            .args(["--host", "0.0.0.0", "--port", "0"])
            .arg("--rl-buffer-dir")
            .arg(tmp.path().join("rl_buffer_open"))
            .stdout(Stdio::null()),
        &log,
        Duration::from_secs(60),
    );
    let _server = Server { child, url };
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("without an API key").count(), 1, "{text}");
    assert!(text.contains("--api-key (OPENCLAW_API_KEY)"), "{text}");
}

#[test]
fn langchain_and_the_npm_client_get_replies_their_schemas_parse_and_turns_say_so() {
    let clients = npm_clients("openai");
    let python = common::python();
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &[]);

    // LangChain: `with_structured_output(Forecast)` by a JSON schema and by a forced tool call,
    // each parsed by pydantic into the model class (a random model: only the grammar makes the
    // reply valid).
    let lc = run_client(
        Command::new(&python).arg(clients.join("structured.py")),
        &server,
    );
    for method in ["json_schema", "function_calling"] {
        let r = &lc[method];
        assert!(r["error"].is_null(), "{method}: {r}");
        let f = &r["parsed"];
        assert!(
            ["celsius", "fahrenheit"].contains(&f["unit"].as_str().unwrap_or_default()),
            "{method}: {r}"
        );
        assert!(
            (1..=7).contains(&f["days"].as_i64().unwrap_or(0)),
            "{method}: {r}"
        );
        assert!(f["rain"].is_boolean(), "{method}: {r}");
    }
    assert_eq!(lc["function_calling"]["tool_calls"], 1, "{lc}");
    assert_eq!(lc["json_schema"]["tool_calls"], 0, "{lc}");

    // npm: `response_format: json_schema`, whole and streamed, and `tool_choice: "required"`.
    let js = run_client(
        Command::new("node").arg(clients.join("structured.mjs")),
        &server,
    );
    for how in ["whole", "stream"] {
        let text = js[how]["content"].as_str().unwrap();
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{how}: {text}: {e}"));
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["answer", "confident", "color"], "{text}");
        assert!((0..=99).contains(&v["answer"].as_i64().unwrap()), "{text}");
        assert!(v["confident"].is_boolean(), "{text}");
        assert!(["red", "green", "blue"].contains(&v["color"].as_str().unwrap()));
    }
    assert_eq!(js["whole"]["finish_reason"], "stop", "{js}");
    assert!(js["stream"]["chunks"].as_u64().unwrap() >= 3, "{js}");
    let calls = js["required"]["tool_calls"].as_array().unwrap();
    assert!(!calls.is_empty(), "{js}");
    assert_eq!(js["required"]["finish_reason"], "tool_calls", "{js}");
    for c in calls {
        assert_eq!(c["name"], "count", "{js}");
        let args: Value = serde_json::from_str(c["arguments"].as_str().unwrap()).unwrap();
        assert!(
            ["apples", "owls"].contains(&args["what"].as_str().unwrap()),
            "{js}"
        );
        assert!((1..=9).contains(&args["n"].as_i64().unwrap()), "{js}");
    }

    // A schema the grammar engine cannot follow is a 400 naming `response_format`.
    let bad = ureq::post(&format!("{}/v1/chat/completions", server.url))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(serde_json::json!({
            "messages": [{"role": "user", "content": "x"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x",
                "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}},
        }))
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.into_body().read_json().unwrap();
    assert_eq!(body["error"]["param"], "response_format", "{body}");

    // Every constrained turn is recorded, marked with its grammar and not trainable.
    drop(server);
    let turns: Vec<Value> = export(&buffer)
        .iter()
        .flat_map(|s| s["turns"].as_array().unwrap().clone())
        .collect();
    let kinds: Vec<&str> = turns
        .iter()
        .map(|t| t["constraint"].as_str().unwrap_or("none"))
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "json_schema").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "tool_call").count(),
        2,
        "{kinds:?}"
    );
    for t in &turns {
        assert_eq!(t["trainable"], t["constraint"].is_null(), "{t}");
    }
}

#[test]
fn the_ai_sdk_holds_conversations_with_a_tool_against_the_built_in_model() {
    let clients = npm_clients("ai");
    let tmp = tempfile::tempdir().unwrap();
    let model = tmp.path().join("builtin");
    let o = host_command(tmp.path())
        .args(["init-default-model", "--out"])
        .arg(&model)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let server = start(&model, &tmp.path().join("rl_buffer"), &[]);
    // Twelve conversations of three turns, each sending the tool's definition and the whole
    // history again: well past the 512 positions the built-in model once had.
    let r = run_client(
        Command::new("node")
            .arg(clients.join("ai_sdk_tools.mjs"))
            .env("OPENCLAW_MODEL", "builtin"),
        &server,
    );
    assert_eq!(r["passed"], 12, "{r}");
    assert!(r["maxPrompt"].as_u64().unwrap() > 512, "{r}");
}

#[test]
fn a_session_key_makes_its_requests_one_session_and_ends_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &["--api-key", "admin-key"]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, key: &str, body: Value| -> (u16, Value) {
        let mut r = agent
            .post(&format!("{}{path}", server.url))
            .header("Authorization", &format!("Bearer {key}"))
            .send_json(body)
            .unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_json().unwrap_or(Value::Null))
    };
    let (status, started) = post("/rl/start_session", "admin-key", serde_json::json!({}));
    assert_eq!(status, 200, "{started}");
    let (session, key) = (
        started["session_id"].as_str().unwrap().to_string(),
        started["api_key"].as_str().unwrap().to_string(),
    );
    // Two unrelated requests with the key: one session, turns 0 and 1.
    for q in ["Describe the owl.", "List three fruits."] {
        let (status, body) = post(
            "/v1/chat/completions",
            &key,
            serde_json::json!({"messages": [{"role": "user", "content": q}], "max_tokens": 4}),
        );
        assert_eq!(status, 200, "{body}");
    }
    // The key is its session's only.
    let (status, body) = post("/rl/start_session", &key, serde_json::json!({}));
    assert_eq!(
        (status, &body["error"]["code"]),
        (403, &Value::from("session_key_not_allowed"))
    );
    let (status, body) = post(
        "/v1/chat/completions",
        &key,
        serde_json::json!({"messages": [{"role": "user", "content": "x"}], "session_id": "other"}),
    );
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("session_id")),
        "{body}"
    );
    // Another session's turn is not the key's to judge, even by its completion id.
    let (status, other) = post(
        "/v1/chat/completions",
        "admin-key",
        serde_json::json!({"messages": [{"role": "user", "content": "Explain gravity."}], "max_tokens": 4, "session_id": "someone-else"}),
    );
    assert_eq!(status, 200, "{other}");
    let (status, body) = post(
        "/rl/set_reward",
        &key,
        serde_json::json!({"completion_id": other["id"], "reward": -1}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("session_key_not_allowed")),
        "{body}"
    );
    // AReaL's set_reward with the key and no turn: the session's latest. `serve` alone trains
    // nothing, so it is recorded for a run to judge by.
    let (status, body) = post("/rl/set_reward", &key, serde_json::json!({"reward": 0.5}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["turn_index"].as_u64(), body["status"].as_str()),
        (Some(1), Some("recorded"))
    );
    // One feedback a turn: the first stands.
    let (status, body) = post(
        "/rl/set_reward",
        &key,
        serde_json::json!({"thumbs": "down"}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("turn_already_judged")),
        "{body}"
    );
    let (status, body) = post("/rl/end_session", &key, serde_json::json!({}));
    assert_eq!(
        (status, body["status"].as_str()),
        (200, Some("ended")),
        "{body}"
    );
    let (status, _) = post(
        "/v1/chat/completions",
        &key,
        serde_json::json!({"messages": [{"role": "user", "content": "x"}]}),
    );
    assert_eq!(status, 401, "an ended session's key is revoked");
    let (status, body) = post(
        "/rl/end_session",
        "admin-key",
        serde_json::json!({"session_id": session}),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("session_not_found"))
    );

    drop(server);
    let sessions = export(&buffer);
    let s = sessions
        .iter()
        .find(|s| s["session_id"] == session.as_str())
        .expect("the session");
    assert_eq!(s["turns"].as_array().unwrap().len(), 2, "{s}");
    let records = openclaw_buffer::Log::read_all(&buffer).unwrap().records;
    assert!(records.iter().any(|e| matches!(&e.record,
        openclaw_buffer::Record::Feedback { session_id, turn_index: 1, reward, .. }
            if *session_id == session && *reward == 0.5)));
    assert!(records.iter().any(|e| matches!(&e.record,
        openclaw_buffer::Record::SessionClosed { session_id, .. } if *session_id == session)));
}

/// `n`: the Python client gets three choices whole and two streamed, each its own turn; the
/// conversation goes on from the second choice, whose turn alone gets the next state; a
/// feedback on an answer of several choices says which.
#[test]
fn several_choices_are_sibling_turns_and_the_one_continued_gets_the_next_state() {
    let python = common::python();
    let clients = workspace().join("tests/clients");
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let buffer = tmp.path().join("rl_buffer");
    let server = start(
        &model,
        &buffer,
        &["--api-key", "test-key", "--max-inflight", "4"],
    );
    let py = run_client(
        Command::new(&python).arg(clients.join("choices.py")),
        &server,
    );
    let whole = &py["whole"];
    assert_eq!(whole["indices"], serde_json::json!([0, 1, 2]), "{py}");
    let texts: Vec<&str> = whole["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let stream = &py["stream"];
    assert_eq!(stream["texts"].as_array().unwrap().len(), 2, "{py}");
    assert!(
        stream["finishes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| ["length", "stop"].contains(&f.as_str().unwrap_or(""))),
        "every choice finishes: {py}"
    );

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let feedback = |body: Value| -> (u16, Value) {
        let mut r = agent
            .post(&format!("{}/v1/feedback", server.url))
            .header("Authorization", "Bearer test-key")
            .send_json(body)
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_json().unwrap())
    };
    // More choices than the server runs at once can never fit: a 400, not a 429 to retry.
    let mut r = agent
        .post(&format!("{}/v1/chat/completions", server.url))
        .header("Authorization", "Bearer test-key")
        .send_json(serde_json::json!({"messages": [{"role": "user", "content": "x"}], "n": 8}))
        .unwrap();
    let body: Value = r.body_mut().read_json().unwrap();
    assert_eq!(
        (r.status().as_u16(), body["error"]["param"].as_str()),
        (400, Some("n")),
        "{body}"
    );
    let (status, body) =
        feedback(serde_json::json!({"completion_id": whole["id"], "thumbs": "up"}));
    assert_eq!(
        (
            status,
            body["error"]["code"].as_str(),
            body["error"]["param"].as_str()
        ),
        (400, Some("choice_index_required"), Some("choice_index")),
        "{body}"
    );
    let (status, body) = feedback(
        serde_json::json!({"completion_id": whole["id"], "choice_index": 2, "thumbs": "up"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["session_id"].as_str(), body["turn_index"].as_u64()),
        (Some("choices"), Some(2))
    );
    drop(server);

    let sessions = export(&buffer);
    let session = |id: &str| {
        sessions
            .iter()
            .find(|s| s["session_id"] == id)
            .unwrap_or_else(|| panic!("session {id}"))["turns"]
            .as_array()
            .unwrap()
            .clone()
    };
    let turns = session("choices");
    assert_eq!(turns.len(), 4, "three choices and the follow-up");
    let mut completion_tokens = 0;
    let mut followed = Vec::new();
    for (i, t) in turns[..3].iter().enumerate() {
        assert_eq!(t["turn_index"], i, "{t}");
        assert_eq!(t["response"]["content"], texts[i], "choice {i}'s turn");
        assert_eq!(t["prompt"], turns[0]["prompt"], "one prompt");
        completion_tokens += t["response_ids"].as_array().unwrap().len();
        if let Some(ns) = t["next_state"]["content"].as_str() {
            assert_eq!(ns, "Thanks, that helps a lot.");
            followed.push(i);
        }
    }
    // One turn goes on, and it said what the second choice said (the second itself unless a
    // sibling said the same).
    assert_eq!(followed.len(), 1, "{turns:?}");
    assert_eq!(texts[followed[0]], texts[1]);
    assert_eq!(
        whole["completion_tokens"], completion_tokens,
        "usage sums the choices"
    );
    assert_eq!(turns[3]["turn_index"], 3);
    let streamed = session("streamed-choices");
    assert_eq!(streamed.len(), 2);
    let streamed_tokens: usize = streamed
        .iter()
        .map(|t| t["response_ids"].as_array().unwrap().len())
        .sum();
    assert_eq!(stream["completion_tokens"], streamed_tokens, "{py}");
}

/// `--lora-modules`, as vLLM serves adapters: each adapter is a model id of its own, listed
/// with its parent; a request naming it is answered by it (in one batch with the others); its
/// turns are recorded with the adapter's name and not trained on; an unknown one is a 404 and
/// an adapter that cannot be loaded stops the server naming it.
#[test]
fn lora_modules_answer_the_requests_that_name_them() {
    use openclaw_engine::adapters::AdapterWeights;
    use openclaw_engine::lora::{save_adapters, LoraConfig};
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let base =
        openclaw_engine::load_model::<openclaw_engine::CpuBackend>(&model, &Default::default())
            .unwrap();
    let cfg = LoraConfig {
        rank: 8,
        alpha: 16.0,
        ..LoraConfig::default()
    };
    let mut modules = Vec::new();
    for (name, seed) in [("alice", 1), ("bob", 2)] {
        let dir = tmp.path().join(name);
        let w = AdapterWeights::random(&base, &cfg, seed, 0.5).unwrap();
        save_adapters(&w.attached_to(&base).unwrap(), &cfg, "model", &dir).unwrap();
        modules.push(format!("{name}={}", dir.display()));
    }
    let buffer = tmp.path().join("rl_buffer");
    let server = start(&model, &buffer, &["--lora-modules", &modules.join(",")]);
    let listed: Value = ureq::get(&format!("{}/v1/models", server.url))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    let ids: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["model", "alice", "bob"], "{listed}");
    assert_eq!(listed["data"][1]["parent"], "model");

    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let ask = |model: &str| -> (u16, Value) {
        let mut r = agent
            .post(&format!("{}/v1/chat/completions", server.url))
            .send_json(serde_json::json!({
                "model": model,
                "messages": [{"role": "user", "content": "Describe the owl."}],
                "max_tokens": 12,
                "temperature": 0,
            }))
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_json().unwrap())
    };
    // Side by side, so the three share decode steps.
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let hs: Vec<_> = ["model", "alice", "bob"]
            .map(|m| s.spawn(move || ask(m)))
            .into_iter()
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let text = |v: &Value| {
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for ((status, body), name) in answers.iter().zip(["model", "alice", "bob"]) {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["model"], name, "the answer names who answered");
    }
    assert!(
        text(&answers[1].1) != text(&answers[0].1) || text(&answers[2].1) != text(&answers[0].1),
        "the adapters answer differently from the base"
    );
    // Greedy again, alone: the same answer as in the shared batch.
    assert_eq!(text(&ask("alice").1), text(&answers[1].1));
    let (status, body) = ask("carol");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    drop(server);

    let turns: Vec<Value> = export(&buffer)
        .into_iter()
        .flat_map(|s| s["turns"].as_array().unwrap().clone())
        .collect();
    let by_adapter = |a: Option<&str>| -> Vec<bool> {
        turns
            .iter()
            .filter(|t| t["adapter"].as_str() == a)
            .map(|t| t["trainable"].as_bool().unwrap())
            .collect()
    };
    assert_eq!(by_adapter(None), [true], "the base's turn trains");
    assert_eq!(
        by_adapter(Some("alice")),
        [false, false],
        "an adapter's turns do not train the base"
    );
    assert_eq!(by_adapter(Some("bob")), [false]);

    // An adapter that cannot be loaded stops the server, naming it.
    let o = host_command(tmp.path())
        .arg("serve")
        .arg("--model-path")
        .arg(&model)
        .args([
            "--port",
            "0",
            "--lora-modules",
            "ghost=/nonexistent/adapter",
            "--rl-buffer-dir",
        ])
        .arg(tmp.path().join("other_buffer"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("adapter `ghost`"),
        "{err}"
    );
}

/// `--adapters per-user`: each request is answered by its user's adapter from
/// `--adapters-dir`, the base for a user without one; the user is required and checked; its
/// turns are recorded as the user's; `run` refuses the mode by name.
#[test]
fn each_user_is_answered_by_their_own_adapter() {
    use openclaw_engine::adapters::AdapterWeights;
    use openclaw_engine::lora::{save_adapters, LoraConfig};
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let base =
        openclaw_engine::load_model::<openclaw_engine::CpuBackend>(&model, &Default::default())
            .unwrap();
    let cfg = LoraConfig {
        rank: 8,
        alpha: 16.0,
        ..LoraConfig::default()
    };
    let users = tmp.path().join("users");
    let w = AdapterWeights::random(&base, &cfg, 9, 0.5).unwrap();
    save_adapters(
        &w.attached_to(&base).unwrap(),
        &cfg,
        "model",
        &users.join("alice"),
    )
    .unwrap();
    let ask = |server: &Server, user: Option<&str>| -> (u16, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut req = agent.post(&format!("{}/v1/chat/completions", server.url));
        if let Some(u) = user {
            req = req.header("X-User-Id", u);
        }
        let mut r = req
            .send_json(serde_json::json!({
                "messages": [{"role": "user", "content": "Describe the owl."}],
                "max_tokens": 12,
                "temperature": 0,
            }))
            .unwrap();
        (r.status().as_u16(), r.body_mut().read_json().unwrap())
    };
    let text = |v: &Value| {
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let buffer = tmp.path().join("rl_buffer");
    let server = start(
        &model,
        &buffer,
        &[
            "--adapters",
            "per-user",
            "--adapters-dir",
            users.to_str().unwrap(),
        ],
    );
    let (status, alice) = ask(&server, Some("alice"));
    assert_eq!(status, 200, "{alice}");
    assert_eq!(
        alice["model"], "model",
        "the served model answers, with alice's adapter"
    );
    let (status, bob) = ask(&server, Some("bob"));
    assert_eq!(status, 200, "{bob}");
    // Both go on from alice's answer: each in their own session.
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    for user in ["alice", "bob"] {
        let mut r = agent
            .post(&format!("{}/v1/chat/completions", server.url))
            .header("X-User-Id", user)
            .send_json(serde_json::json!({
                "messages": [
                    {"role": "user", "content": "Describe the owl."},
                    {"role": "assistant", "content": text(&alice)},
                    {"role": "user", "content": "Thanks, that helps a lot."},
                ],
                "max_tokens": 4,
            }))
            .unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "{}",
            r.body_mut().read_to_string().unwrap()
        );
    }
    // An id the client chooses is its user's own: the same id, two sessions.
    for user in ["alice", "bob"] {
        let mut r = agent
            .post(&format!("{}/v1/chat/completions", server.url))
            .header("X-User-Id", user)
            .header("X-Session-Id", "team-chat")
            .send_json(serde_json::json!({
                "messages": [{"role": "user", "content": "Describe the owl."}],
                "max_tokens": 4,
            }))
            .unwrap();
        let v: Value = r.body_mut().read_json().unwrap();
        assert_eq!(v["session_id"], format!("{user}@team-chat"), "{v}");
    }
    for (user, param) in [(None, "user"), (Some("../alice"), "user")] {
        let (status, body) = ask(&server, user);
        assert_eq!(
            (status, body["error"]["param"].as_str()),
            (400, Some(param)),
            "{body}"
        );
    }
    drop(server);
    let plain = start(&model, &tmp.path().join("plain_buffer"), &[]);
    let (_, base_answer) = ask(&plain, None);
    drop(plain);
    assert_eq!(
        text(&bob),
        text(&base_answer),
        "a user without an adapter gets the base"
    );
    assert_ne!(text(&alice), text(&base_answer), "alice gets her adapter");

    let sessions = export(&buffer);
    let by_session: Vec<Vec<&str>> = sessions
        .iter()
        .map(|s| {
            s["turns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["adapter"].as_str().unwrap())
                .collect()
        })
        .collect();
    // Alice's conversation is one session of two turns with a next state; bob's repeat of
    // her history did not join it; the id both chose made a session each.
    assert_eq!(
        by_session,
        [
            vec!["alice", "alice"],
            vec!["bob"],
            vec!["bob"],
            vec!["alice"],
            vec!["bob"]
        ],
        "{sessions:?}"
    );
    assert_eq!(
        sessions[0]["turns"][0]["next_state"]["content"],
        "Thanks, that helps a lot."
    );

    // `run` trains each user's adapter as LoRA: without `--use-lora` it refuses the mode,
    // naming the flag that is missing.
    let o = host_command(tmp.path())
        .arg("run")
        .arg("--model-path")
        .arg(&model)
        .args([
            "--port",
            "0",
            "--max-steps",
            "1",
            "--judge",
            "rule",
            "--adapters",
            "per-user",
            "--adapters-dir",
        ])
        .arg(&users)
        .arg("--plugin")
        .arg(workspace().join("methods/binary-rl"))
        .arg("--rl-buffer-dir")
        .arg(tmp.path().join("run_buffer"))
        .arg("--save-dir")
        .arg(tmp.path().join("save"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("--adapters per-user") && err.contains("--use-lora"),
        "{err}"
    );
}

/// `--user-keys-file`: the server's key issues a key for a user (`POST /admin/users`); a
/// request with it is that user's (recorded so, answered by their adapter) and may not name
/// another; a user key manages nothing; keys outlive a restart and a revocation ends them.
#[test]
fn user_keys_name_their_user_and_only_the_server_key_issues_them() {
    let tmp = tempfile::tempdir().unwrap();
    let model = tiny_model(tmp.path());
    let users = tmp.path().join("users");
    std::fs::create_dir_all(&users).unwrap();
    let keys_file = tmp.path().join("users.keys");
    let buffer = tmp.path().join("rl_buffer");
    let flags = [
        "--api-key",
        "admin-key",
        "--adapters",
        "per-user",
        "--adapters-dir",
        users.to_str().unwrap(),
        "--user-keys-file",
        keys_file.to_str().unwrap(),
    ];
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let call = |server: &Server,
                method: &str,
                path: &str,
                key: &str,
                body: Option<Value>|
     -> (u16, Value) {
        let url = format!("{}{path}", server.url);
        let auth = format!("Bearer {key}");
        let mut r = match (method, body) {
            ("POST", Some(b)) => agent.post(&url).header("Authorization", &auth).send_json(b),
            ("DELETE", _) => agent.delete(&url).header("Authorization", &auth).call(),
            _ => unreachable!(),
        }
        .unwrap();
        (
            r.status().as_u16(),
            r.body_mut().read_json().unwrap_or(Value::Null),
        )
    };
    let chat = |server: &Server, key: &str, extra: Value| {
        let mut body = serde_json::json!({"messages": [{"role": "user", "content": "Describe the owl."}], "max_tokens": 4});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        call(server, "POST", "/v1/chat/completions", key, Some(body))
    };
    let server = start(&model, &buffer, &flags);
    let (status, issued) = call(
        &server,
        "POST",
        "/admin/users",
        "admin-key",
        Some(serde_json::json!({"user": "alice"})),
    );
    assert_eq!(status, 200, "{issued}");
    let alice = issued["api_key"].as_str().unwrap().to_string();
    assert_eq!(chat(&server, &alice, serde_json::json!({})).0, 200);
    let (status, body) = chat(&server, &alice, serde_json::json!({"user": "bob"}));
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("user")),
        "{body}"
    );
    // Alice's key names no one else's turn and ends no session.
    let (status, bobs) = chat(&server, "admin-key", serde_json::json!({"user": "bob"}));
    assert_eq!(status, 200, "{bobs}");
    let (status, body) = call(
        &server,
        "POST",
        "/v1/feedback",
        &alice,
        Some(serde_json::json!({"completion_id": bobs["id"], "thumbs": "down"})),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("session_key_not_allowed")),
        "{body}"
    );
    let (status, body) = call(
        &server,
        "POST",
        "/rl/end_session",
        &alice,
        Some(serde_json::json!({"session_id": "x"})),
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = call(
        &server,
        "POST",
        "/admin/users",
        &alice,
        Some(serde_json::json!({"user": "mallory"})),
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("admin_key_required")),
        "{body}"
    );
    let (status, body) = call(
        &server,
        "POST",
        "/admin/users",
        "admin-key",
        Some(serde_json::json!({"user": "../x"})),
    );
    assert_eq!(
        (status, body["error"]["param"].as_str()),
        (400, Some("user")),
        "{body}"
    );
    drop(server);
    assert!(
        !std::fs::read_to_string(&keys_file)
            .unwrap()
            .contains(&alice),
        "the file keeps hashes"
    );

    // After a restart the key still names alice; revoked, it is refused.
    let server = start(&model, &buffer, &flags);
    assert_eq!(chat(&server, &alice, serde_json::json!({})).0, 200);
    let (status, body) = call(&server, "DELETE", "/admin/users/alice", "admin-key", None);
    assert_eq!((status, body["revoked"].as_u64()), (200, Some(1)), "{body}");
    assert_eq!(chat(&server, &alice, serde_json::json!({})).0, 401);
    drop(server);
    let owners: Vec<String> = export(&buffer)
        .into_iter()
        .flat_map(|s| s["turns"].as_array().unwrap().clone())
        .map(|t| t["adapter"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(owners, ["alice", "bob", "alice"]);
}
