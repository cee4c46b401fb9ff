//! Real episodes of the GUI environment in headless Chromium: scripted right runs score 1 and
//! wrong ones 0, every action reaches the page as the task set's checker sends it, and a
//! browser that is killed or a page that hangs fails only its own episode.
//!
//! They need Debian's `chromium` and `chromium-driver`. Without them each test says SKIPPED
//! and passes, except under `OPENCLAW_REQUIRE_ASSETS=1` (CI), where it fails. The tests take
//! turns (one browser-heavy test at a time), so the small action limits of the hang tests are
//! not hit by a machine busy with the others.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use openclaw_env_gui::actions::call_message;
use openclaw_env_gui::{browser, GuiEnv};
use openclaw_plugin_api::serde_json::{self, json, Value};
use openclaw_plugin_api::{Action, Env, Evaluation, HostServices, Message, StepOutcome, Task};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Whether Chromium and chromedriver are here; without them the test fails in CI
/// (`OPENCLAW_REQUIRE_ASSETS=1`) and is skipped elsewhere.
fn have_browser() -> bool {
    let missing: Vec<&str> = ["chromium", "chromedriver"]
        .into_iter()
        .filter(|p| browser::find_program(p).is_none())
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var("OPENCLAW_REQUIRE_ASSETS").as_deref() != Ok("1"),
        "{} not found and OPENCLAW_REQUIRE_ASSETS=1: {}",
        missing.join(" and "),
        browser::INSTALL
    );
    eprintln!(
        "SKIPPED: {} not found ({})",
        missing.join(" and "),
        browser::INSTALL
    );
    false
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tasks")
}

fn env(extra: &str) -> GuiEnv {
    GuiEnv::new(&format!("[env]\n{extra}"), HostServices::standalone())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The environment over the test tasks in `tests/fixtures/tasks`.
fn fixture_env(extra: &str) -> GuiEnv {
    env(&format!(
        "tasks_dir = {:?}\n{extra}",
        fixtures().display().to_string()
    ))
}

fn task(env: &GuiEnv, id: &str) -> Task {
    env.tasks("all")
        .unwrap()
        .into_iter()
        .find(|t| t.id.as_str() == id)
        .unwrap_or_else(|| panic!("no task {id}"))
}

fn call(args: Value) -> Action {
    call_message(&args, "call_0")
}

fn say(text: &str) -> Action {
    Action {
        message: Message::new("assistant", text),
    }
}

fn meta(out: &StepOutcome) -> Value {
    serde_json::from_str(&out.info.metadata_json).unwrap()
}

fn details(e: &Evaluation) -> Value {
    serde_json::from_str(&e.details_json).unwrap()
}

fn said(out: &StepOutcome) -> String {
    out.observation
        .messages
        .iter()
        .map(|m| m.content.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A PNG's width and height.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]))
}

/// Runs `actions` (one call per message) in a new episode of `t`, then evaluates and closes
/// it; a solution must run without a tool error.
fn run_script(env: &GuiEnv, t: &Task, actions: &[Value], clean: bool) -> Evaluation {
    let (id, _) = env.reset(t, 0).unwrap_or_else(|e| panic!("{}: {e}", t.id));
    for (i, a) in actions.iter().enumerate() {
        let out = env
            .step(id, &call_message(a, &format!("call_{i}")))
            .unwrap_or_else(|e| panic!("{}: action {i}: {e}", t.id));
        let text = said(&out);
        if clean {
            assert!(
                !text.contains("[TOOL_ERROR]"),
                "{}: action {i} ({a}): {text}",
                t.id
            );
        }
        if out.done {
            break;
        }
    }
    let e = env.evaluate(id).unwrap();
    env.close(id).unwrap();
    e
}

#[test]
fn the_first_observation_and_a_step_show_the_page_and_keep_its_screenshot() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = fixture_env("");
    let t = task(&env, "click-button");
    assert_eq!(t.instruction.as_str(), "Press the Go button.");
    let (id, first) = env.reset(&t, 0).unwrap();
    assert_eq!(first.messages.len(), 1);
    let m = &first.messages[0];
    assert_eq!(m.role.as_str(), "user");
    let text = m.content.to_string();
    assert!(text.starts_with("Press the Go button.\n\n"), "{text}");
    // Go's center is (500, 340) px: grid (500, 425).
    assert!(text.contains("button \"Go\" @[500, 425]"), "{text}");
    assert!(
        text.contains("[screenshot step-000.png, 1000x800 pixels]"),
        "{text}"
    );
    let tools: Value = serde_json::from_str(&first.tools_json).unwrap();
    assert_eq!(tools[0]["function"]["name"], "computer_use");

    let out = env
        .step(
            id,
            &call(json!({"action": "left_click", "coordinate": [500, 425]})),
        )
        .unwrap();
    assert!(!out.done);
    let reply = &out.observation.messages[0];
    assert_eq!(reply.role.as_str(), "tool");
    assert_eq!(
        reply
            .tool_call_id
            .as_ref()
            .into_option()
            .map(|s| s.as_str()),
        Some("call_0")
    );
    let text = reply.content.to_string();
    assert!(text.starts_with("left_click at [500, 425]"), "{text}");
    assert!(text.contains("button \"Done\""), "{text}");
    assert!(text.contains("[screenshot step-001.png"), "{text}");
    let m = meta(&out);
    assert_eq!(m["viewport"], json!([1000, 800, 1]), "{m}");
    assert_eq!(m["pointer"], json!([500, 340]));
    let shot = PathBuf::from(m["screenshot"].as_str().expect("a screenshot path"));
    assert!(shot.ends_with("step-001.png"), "{}", shot.display());
    assert_eq!(png_size(&std::fs::read(&shot).unwrap()), (1000, 800));
    assert!(shot.with_file_name("step-000.png").is_file());
    assert!(m["browser_processes"].as_u64().unwrap() >= 1, "{m}");
    assert!(m["browser_rss_mb"].as_f64().unwrap() > 1.0, "{m}");

    // Cut off by the host before it ended: still scored.
    let e = env.evaluate(id).unwrap();
    assert!(e.solved && e.reward == 1.0, "{}", e.details_json);
    let d = details(&e);
    assert_eq!(d["check_result"], json!(true));
    assert_eq!(d["screenshots"], 2);
    assert_eq!(d["ended"], "not ended (cut off by the host)");
    env.close(id).unwrap();
    assert!(shot.is_file(), "screenshots stay after the episode");
    assert!(env.browser_pids(id).is_err(), "the episode is closed");
}

#[test]
fn scripted_right_runs_score_one_and_wrong_ones_zero() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = fixture_env("");
    for id in ["click-button", "type-enter"] {
        let t = task(&env, id);
        let right = run_script(&env, &t, &env.reference_actions(id).unwrap(), true);
        assert!(
            right.reward == 1.0 && right.solved,
            "{id}: the solution scored {}: {}",
            right.reward,
            right.details_json
        );
        assert_eq!(details(&right)["ended"], "terminate");
        let wrong = run_script(&env, &t, &env.wrong_actions(id).unwrap(), false);
        assert!(
            wrong.reward == 0.0 && !wrong.solved,
            "{id}: the wrong run scored {}: {}",
            wrong.reward,
            wrong.details_json
        );
    }
    assert_eq!(env.tasks("train").unwrap().len(), 3);
    assert_eq!(env.tasks("test").unwrap().len(), 2);
    assert_eq!(env.tasks("eval").unwrap().len(), 2);
}

#[test]
fn two_built_in_tasks_score_one_for_their_solution_and_zero_for_the_wrong_run() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = env("");
    assert!(
        env.broken_tasks().is_empty(),
        "broken built-in tasks: {:?}",
        env.broken_tasks()
    );
    let specs = env.task_specs().to_vec();
    // One of each split when there are both.
    let mut picks: Vec<String> = Vec::new();
    for test in [false, true] {
        if let Some(s) = specs.iter().find(|s| s.is_test() == test) {
            picks.push(s.id.clone());
        }
    }
    for s in &specs {
        if picks.len() < 2 && !picks.contains(&s.id) {
            picks.push(s.id.clone());
        }
    }
    assert_eq!(picks.len(), 2, "{} built-in tasks", specs.len());
    for id in &picks {
        let t = task(&env, id);
        let right = run_script(&env, &t, &env.reference_actions(id).unwrap(), true);
        assert!(
            right.reward == 1.0 && right.solved,
            "{id}: the solution scored {}: {}",
            right.reward,
            right.details_json
        );
        let wrong = run_script(&env, &t, &env.wrong_actions(id).unwrap(), false);
        assert!(
            wrong.reward == 0.0,
            "{id}: the wrong run scored {}: {}",
            wrong.reward,
            wrong.details_json
        );
    }
}

#[test]
fn every_action_reaches_the_page_as_the_checker_sends_it() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = fixture_env("");
    let t = task(&env, "all-actions");
    let (id, first) = env.reset(&t, 0).unwrap();
    // The field's center (800, 35) px is grid (800, 44).
    assert!(
        first.messages[0]
            .content
            .contains("textbox \"Field\" @[800, 44]"),
        "{}",
        first.messages[0].content
    );
    // Steps `args` and returns the events the page recorded meanwhile.
    let mut n = 0;
    let mut act = |args: Value| -> Vec<Value> {
        n += 1;
        let out = env
            .step(id, &call_message(&args, &format!("call_{n}")))
            .unwrap();
        let text = said(&out);
        assert!(!text.contains("[TOOL_ERROR]"), "{args}: {text}");
        assert!(!out.done, "{args}");
        let events = env
            .execute_script(id, "const e = window.events; window.events = []; return e;")
            .unwrap();
        events.as_array().unwrap().clone()
    };
    let find = |events: &[Value], kind: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .cloned()
            .collect()
    };
    let at = |e: &Value| (e["x"].as_i64().unwrap(), e["y"].as_i64().unwrap());

    let ev = act(json!({"action": "mouse_move", "coordinate": [500, 500]}));
    assert_eq!(at(find(&ev, "mousemove").last().unwrap()), (500, 400));

    let ev = act(json!({"action": "left_click", "coordinate": [100, 100]}));
    let down = find(&ev, "mousedown");
    assert_eq!(
        (down.len(), at(&down[0]), down[0]["button"].as_i64()),
        (1, (100, 80), Some(0))
    );
    assert_eq!(find(&ev, "click").len(), 1);

    // Where the pointer is.
    let ev = act(json!({"action": "right_click"}));
    let down = find(&ev, "mousedown");
    assert_eq!(
        (at(&down[0]), down[0]["button"].as_i64()),
        ((100, 80), Some(2))
    );
    assert_eq!(find(&ev, "contextmenu").len(), 1);

    let ev = act(json!({"action": "middle_click", "coordinate": [200, 200]}));
    let down = find(&ev, "mousedown");
    assert_eq!(
        (at(&down[0]), down[0]["button"].as_i64()),
        ((200, 160), Some(1))
    );

    // From the pointer (200, 160) px to (800, 480) px, through ten moves.
    let ev = act(json!({"action": "left_click_drag", "coordinate": [800, 600]}));
    assert_eq!(at(&find(&ev, "mousedown")[0]), (200, 160));
    assert_eq!(at(&find(&ev, "mouseup")[0]), (800, 480));
    assert!(find(&ev, "mousemove").len() >= 10, "{ev:?}");

    let ev = act(json!({"action": "double_click", "coordinate": [300, 300]}));
    let dbl = find(&ev, "dblclick");
    assert_eq!((dbl.len(), at(&dbl[0])), (1, (300, 240)));

    let ev = act(json!({"action": "triple_click", "coordinate": [600, 300]}));
    let clicks = find(&ev, "click");
    assert_eq!(clicks.len(), 3);
    assert_eq!(
        (at(&clicks[2]), clicks[2]["detail"].as_i64()),
        ((600, 240), Some(3))
    );

    let ev = act(json!({"action": "key", "keys": ["ctrl", "a"]}));
    let keys = find(&ev, "keydown");
    assert_eq!(keys[0]["key"], "Control");
    assert_eq!(
        (keys[1]["key"].as_str(), keys[1]["ctrl"].as_bool()),
        (Some("a"), Some(true))
    );

    act(json!({"action": "left_click", "coordinate": [800, 44]}));
    let ev = act(json!({"action": "type", "text": "Hi"}));
    assert_eq!(find(&ev, "keydown").len(), 2);
    assert_eq!(
        env.execute_script(id, "return document.getElementById('field').value;")
            .unwrap(),
        "Hi"
    );

    // Negative pixels scroll down: deltaY = 300.
    let ev = act(json!({"action": "scroll", "coordinate": [500, 500], "pixels": -3}));
    assert_eq!(find(&ev, "wheel")[0]["dy"].as_f64(), Some(300.0));
    let ev = act(json!({"action": "hscroll", "pixels": 2}));
    assert_eq!(find(&ev, "wheel")[0]["dx"].as_f64(), Some(200.0));
    assert_eq!(
        env.execute_script(id, "return [window.scrollX, window.scrollY];")
            .unwrap(),
        json!([200, 300])
    );

    let started = Instant::now();
    act(json!({"action": "wait", "time": 0.5}));
    assert!(started.elapsed() >= Duration::from_millis(500));

    let out = env
        .step(
            id,
            &call(json!({"action": "terminate", "status": "success"})),
        )
        .unwrap();
    assert!(out.done && !out.info.truncated);
    let m = meta(&out);
    assert_eq!(
        (m["ended"].as_str(), m["terminate_status"].as_str()),
        (Some("terminate"), Some("success"))
    );
    assert!(env
        .step(id, &call(json!({"action": "wait", "time": 0})))
        .is_err());
    assert_eq!(env.evaluate(id).unwrap().reward, 1.0);
    env.close(id).unwrap();
}

#[test]
fn unreadable_calls_are_answered_counted_and_end_the_episode() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = fixture_env("");
    let t = task(&env, "click-button");
    let (id, _) = env.reset(&t, 0).unwrap();
    let out = env.step(id, &say("I would click Go.")).unwrap();
    assert_eq!(out.observation.messages[0].role.as_str(), "user");
    assert!(said(&out).contains("[TOOL_ERROR] no tool call found: call `computer_use`"));
    assert!(!out.done);
    let out = env
        .step(
            id,
            &call(json!({"action": "left_click", "coordinate": [500, 1200]})),
        )
        .unwrap();
    assert!(said(&out).contains("[TOOL_ERROR]") && said(&out).contains("outside the grid"));
    assert_eq!(meta(&out)["parse_errors"], 2);
    // The <tool_call> form, naming another tool.
    let out = env
        .step(
            id,
            &say("<tool_call>{\"name\": \"browser\", \"arguments\": {\"action\": \"wait\", \"time\": 0}}</tool_call>"),
        )
        .unwrap();
    assert!(said(&out).contains("unknown tool `browser`"));
    assert!(out.done && !out.info.truncated);
    assert_eq!(meta(&out)["ended"], "parse_errors");
    let e = env.evaluate(id).unwrap();
    assert_eq!(e.reward, 0.0);
    env.close(id).unwrap();

    // The task's max_steps (5) truncates.
    let (id, _) = env.reset(&t, 0).unwrap();
    let mut last = None;
    for _ in 0..5 {
        last = Some(
            env.step(
                id,
                &call(json!({"action": "mouse_move", "coordinate": [1, 1]})),
            )
            .unwrap(),
        );
    }
    let out = last.unwrap();
    assert!(out.done && out.info.truncated);
    assert_eq!(meta(&out)["ended"], "max_steps");
    env.close(id).unwrap();
}

#[test]
fn a_killed_browser_fails_only_its_episode() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = fixture_env("action_seconds = 10\n");
    let t = task(&env, "click-button");
    let (a, _) = env.reset(&t, 0).unwrap();
    let (b, _) = env.reset(&t, 0).unwrap();
    let pids_a = env.browser_pids(a).unwrap();
    let pids_b = env.browser_pids(b).unwrap();
    assert!(!pids_a.is_empty() && !pids_b.is_empty());
    assert!(
        pids_a.iter().all(|p| !pids_b.contains(p)),
        "{pids_a:?} {pids_b:?}"
    );
    // Chromium's processes of that session, under chromedriver.
    let under_driver = browser::descendants(&browser::processes(), &[env.chromedriver_pid()]);
    assert!(
        pids_a.iter().all(|p| under_driver.contains(p)),
        "{pids_a:?}"
    );
    browser::kill(&pids_a);

    let started = Instant::now();
    let out = env
        .step(
            a,
            &call(json!({"action": "left_click", "coordinate": [500, 425]})),
        )
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
    assert!(out.done && out.info.truncated, "{}", said(&out));
    let m = meta(&out);
    assert_eq!(m["ended"], "browser", "{m}");
    assert!(m["browser_failure"].is_string(), "{m}");
    assert!(said(&out).contains("the episode is over"));
    assert!(env
        .step(a, &call(json!({"action": "wait", "time": 0})))
        .is_err());
    let e = env.evaluate(a).unwrap();
    assert!(e.reward == 0.0 && !e.solved);
    assert!(
        details(&e)["browser_failure"].is_string(),
        "{}",
        e.details_json
    );
    env.close(a).unwrap();

    // The other episode goes on and scores.
    for args in env.reference_actions("click-button").unwrap() {
        if env.step(b, &call(args)).unwrap().done {
            break;
        }
    }
    let e = env.evaluate(b).unwrap();
    assert!(e.reward == 1.0 && e.solved, "{}", e.details_json);
    env.close(b).unwrap();
    // And a new one starts.
    let right = run_script(
        &env,
        &t,
        &env.reference_actions("click-button").unwrap(),
        true,
    );
    assert_eq!(right.reward, 1.0);

    let driver = env.chromedriver_pid();
    drop(env);
    assert!(
        !browser::alive(driver),
        "chromedriver outlived the environment"
    );
}

#[test]
fn a_hung_page_fails_its_episode_within_the_action_limit() {
    if !have_browser() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = fixture_env("action_seconds = 5\nstep_seconds = 10\n");
    let (other, _) = env.reset(&task(&env, "click-button"), 0).unwrap();
    let (hung, _) = env.reset(&task(&env, "hang-on-click"), 0).unwrap();
    assert!(!env.browser_pids(hung).unwrap().is_empty());

    let started = Instant::now();
    let out = env
        .step(
            hung,
            &call(json!({"action": "left_click", "coordinate": [500, 500]})),
        )
        .unwrap();
    let took = started.elapsed();
    // The click (or the screenshot after it) waits 5 s; a second more for the rest.
    assert!(took < Duration::from_secs(5 + 5 + 5), "{took:?}");
    assert!(out.done && out.info.truncated, "{}", said(&out));
    let m = meta(&out);
    assert_eq!(m["ended"], "browser");
    let why = m["browser_failure"].as_str().unwrap().to_string();
    // Its own limit, or chromedriver's a little later.
    assert!(
        why.contains("did not answer within 5 s") || why.contains("imed out"),
        "{why}"
    );
    assert!(
        env.browser_pids(hung).unwrap().is_empty(),
        "the hung browser was not killed"
    );
    let e = env.evaluate(hung).unwrap();
    assert_eq!(e.reward, 0.0);
    assert_eq!(details(&e)["browser_failure"], why.as_str());
    env.close(hung).unwrap();

    // The other episode is unaffected.
    let out = env
        .step(
            other,
            &call(json!({"action": "left_click", "coordinate": [500, 425]})),
        )
        .unwrap();
    assert!(!out.done, "{}", said(&out));
    assert_eq!(env.evaluate(other).unwrap().reward, 1.0);
    env.close(other).unwrap();

    // A page that stops answering right after it loads: its reset fails within the limits, or
    // its first step ends it.
    let t = task(&env, "hang-after-load");
    let started = Instant::now();
    match env.reset(&t, 0) {
        Err(e) => {
            assert!(e.contains("hang-after-load"), "{e}");
            assert!(
                started.elapsed() < Duration::from_secs(45),
                "{:?}",
                started.elapsed()
            );
        }
        Ok((id, _)) => {
            let out = env
                .step(id, &call(json!({"action": "wait", "time": 0})))
                .unwrap();
            assert!(out.done && out.info.truncated, "{}", said(&out));
            assert_eq!(env.evaluate(id).unwrap().reward, 0.0);
            env.close(id).unwrap();
        }
    }
    // The environment still runs episodes.
    let right = run_script(
        &env,
        &task(&env, "click-button"),
        &env.reference_actions("click-button").unwrap(),
        true,
    );
    assert_eq!(right.reward, 1.0);
}

/// The slow tier: every built-in task (`scripts/test.sh --fast` leaves it out).
mod slow {
    use super::*;

    #[test]
    fn every_built_in_task_scores_one_for_its_solution_and_zero_for_its_wrong_run() {
        if !have_browser() {
            return;
        }
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let env = env("");
        assert!(env.broken_tasks().is_empty(), "{:?}", env.broken_tasks());
        let specs = env.task_specs().to_vec();
        assert!(!specs.is_empty());
        // Two episodes at a time (the environment serves them in parallel, each with its own
        // browser): the set's 48 runs take about half as long on two cores.
        let failures = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for half in specs.chunks(specs.len().div_ceil(2)) {
                let (env, failures) = (&env, &failures);
                scope.spawn(move || {
                    for s in half {
                        let t = task(env, &s.id);
                        let right =
                            run_script(env, &t, &env.reference_actions(&s.id).unwrap(), false);
                        let wrong = run_script(env, &t, &env.wrong_actions(&s.id).unwrap(), false);
                        if (right.reward, wrong.reward) != (1.0, 0.0) {
                            failures.lock().unwrap().push(format!(
                                "{}: solution {} ({}), wrong {}",
                                s.id, right.reward, right.details_json, wrong.reward
                            ));
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
