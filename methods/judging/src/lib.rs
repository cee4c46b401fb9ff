//! Judge prompts, vote parsing and hint extraction for reward plugins that ask a judge model
//! about a turn. A library the methods link (it exports no plugin); it lives apart from the
//! ABI crate so that changing a prompt is not an ABI change.
//!
//! Two judges are built here, because several methods use them and one plugin library cannot
//! link another (each exports the same root-module symbol):
//!
//! - the **outcome judge** of binary RL ([`prm_judge_messages`], [`prm_votes`]): did the
//!   assistant's output do what the user wanted, judged from the next state; each vote is
//!   `\boxed{1}`, `\boxed{-1}` or `\boxed{0}` and the votes are merged by [`majority_vote`];
//! - the **hint judge** of on-policy distillation ([`hint_judge_messages`], [`hint_votes`]):
//!   does the next state hold hindsight that would have improved the response, and if so, what
//!   hint (`[HINT_START] ... [HINT_END]`); the teacher then scores the turn's exact response
//!   tokens under the prompt with the hint appended ([`hinted_teacher_scores`]).
//!
//! Parsing is lenient about spacing and strict about values: an answer that cannot be read is an
//! invalid vote, never a guess.
//!
//! The rewards around the judges share the rest here too: the turns no judge reads
//! ([`judge_turn`]), the `reward.max_judge_chars` key ([`check_max_judge_chars`]) and the
//! services a distilling reward needs ([`DistillServices`]).

#![warn(missing_docs)]

use openclaw_plugin_api::abi_stable::std_types::ROption;
use openclaw_plugin_api::host::{Judge, JudgeRequest, Policy, ScoreTokens, TokenScores};
use openclaw_plugin_api::serde_json::{self, Value};
use openclaw_plugin_api::{
    JudgeSettings, Message, SamplingParams, Score, ScoreRequest, TopKEntries, Turn, TurnType,
};

/// The valid votes of the outcome judge.
pub const PRM_VALUES: [i32; 3] = [1, -1, 0];
/// The valid decisions of the hint judge.
pub const HINT_VALUES: [i32; 2] = [1, -1];
/// The marker that opens a hint in the hint judge's answer.
pub const HINT_START: &str = "[HINT_START]";
/// The marker that closes a hint in the hint judge's answer.
pub const HINT_END: &str = "[HINT_END]";
/// The line that introduces a hint appended to the teacher's prompt.
pub const HINT_MARKER: &str = "[user's hint / instruction]";
/// A hint must be longer than this many characters (after trimming) to be used.
pub const MIN_HINT_CHARS: usize = 10;

mod ask;
mod parse;
mod prompts;
mod reward;
#[cfg(any(test, feature = "testing"))]
pub mod scripted;
mod teacher;

pub use ask::*;
pub use parse::*;
pub use prompts::*;
pub use reward::*;
pub use teacher::*;

// ---------------------------------------------------------------------------------------------
// Running two things at once

/// Runs `a` on a second thread while `b` runs on this one, and returns both results: the two
/// sets of judge votes of a turn do not wait for each other. A panic in `a` becomes an error.
pub fn run_both<A: Send, B>(
    a: impl FnOnce() -> Result<A, String> + Send,
    b: impl FnOnce() -> Result<B, String>,
) -> Result<(A, B), String> {
    std::thread::scope(|s| {
        let handle = s.spawn(a);
        let b = b();
        let a = handle.join().map_err(|p| {
            format!(
                "a judge thread panicked: {}",
                openclaw_plugin_api::ffi::panic_message(&*p)
            )
        })?;
        Ok((a?, b?))
    })
}

#[cfg(test)]
mod tests {
    use super::scripted::{ScriptedJudge, ScriptedPolicy};
    use super::*;
    use openclaw_plugin_api::host::{Generation, HostServices};
    use openclaw_plugin_api::NextState;
    use std::sync::Arc;
    use std::time::Duration;

    const B: &[i32] = &PRM_VALUES;

    #[test]
    fn boxed_scores_parse_the_last_box_with_spaces_and_signs() {
        assert_eq!(parse_boxed_score("so \\boxed{1}", B), Some(1));
        assert_eq!(parse_boxed_score("\\boxed{-1}", B), Some(-1));
        assert_eq!(parse_boxed_score("\\boxed{0}.", B), Some(0));
        assert_eq!(parse_boxed_score("\\boxed{ 1 }", B), Some(1));
        assert_eq!(parse_boxed_score("\\boxed{+1}", B), Some(1));
        assert_eq!(parse_boxed_score("\\boxed{ - 1 }", B), Some(-1));
        // Several boxes: the last one is the answer.
        assert_eq!(
            parse_boxed_score("\\boxed{1} hmm, no: \\boxed{-1}", B),
            Some(-1)
        );
        assert_eq!(
            parse_boxed_score("\\boxed{-1}\n\\boxed{0}\nfinal \\boxed{1}", B),
            Some(1)
        );
    }

    #[test]
    fn malformed_or_disallowed_boxes_are_invalid() {
        for text in [
            "",
            "no box at all, score 1",
            "\\boxed{2}",
            "\\boxed{}",
            "\\boxed{ }",
            "\\boxed{+}",
            "\\boxed{yes}",
            "\\boxed{1.0}",
            "\\boxed{10}",
            "\\boxed{1",
            "boxed{1}",
            "\\boxed{--1}",
            // The final box decides even when an earlier one was valid.
            "\\boxed{1} ... \\boxed{2}",
            "\\boxed{1} ... \\boxed{}",
        ] {
            assert_eq!(parse_boxed_score(text, B), None, "{text:?}");
        }
        // 0 is not a hint decision.
        assert_eq!(parse_boxed_score("\\boxed{0}", &HINT_VALUES), None);
        assert_eq!(parse_boxed_score("\\boxed{-1}", &HINT_VALUES), Some(-1));
        assert_eq!(parse_boxed_score("\\boxed{99999999999}", B), None);
    }

    #[test]
    fn majority_needs_a_unique_winner_with_enough_share() {
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0], 0.5), 1.0);
        assert_eq!(majority_vote(&[-1.0, 1.0, -1.0], 0.5), -1.0);
        assert_eq!(majority_vote(&[1.0, -1.0, 0.0], 0.5), 0.0);
        assert_eq!(majority_vote(&[1.0], 0.5), 1.0);
        assert_eq!(majority_vote(&[-1.0], 1.0), -1.0);
        assert_eq!(majority_vote(&[], 0.5), 0.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0], 0.7), 0.0);
        // Ties between the two most common values give 0 whatever the threshold.
        assert_eq!(majority_vote(&[1.0, -1.0], 0.0), 0.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0, -1.0, 0.0], 0.0), 0.0);
        // A share exactly at the threshold wins.
        assert_eq!(majority_vote(&[1.0, 1.0, 1.0, -1.0, 0.0], 0.6), 1.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0, 0.0], 0.5), 1.0);
        assert_eq!(majority_vote(&[1.0, 1.0, -1.0, 0.0], 0.51), 0.0);
        // A winning 0 is 0; non-finite entries are not votes.
        assert_eq!(majority_vote(&[0.0, 0.0, 1.0], 0.5), 0.0);
        assert_eq!(majority_vote(&[f32::NAN, 1.0, f32::NAN], 0.9), 1.0);
    }

    #[test]
    fn hints_come_from_the_last_complete_span() {
        assert_eq!(
            extract_hint("\\boxed{1}\n[HINT_START]  Ask first.  [HINT_END]").as_deref(),
            Some("Ask first.")
        );
        assert_eq!(
            extract_hint("[HINT_START]one[HINT_END] then [HINT_START]\ntwo\nlines\n[HINT_END]")
                .as_deref(),
            Some("two\nlines")
        );
        // A truncated last span does not count; the earlier complete one does.
        assert_eq!(
            extract_hint("[HINT_START]kept[HINT_END] [HINT_START]cut off").as_deref(),
            Some("kept")
        );
        assert_eq!(extract_hint("[HINT_START] never closed"), None);
        assert_eq!(extract_hint("only an end [HINT_END]"), None);
        assert_eq!(extract_hint("[HINT_END] backwards [HINT_START]"), None);
        assert_eq!(extract_hint("[HINT_START]   [HINT_END]"), None);
        assert_eq!(extract_hint("no hint"), None);
        // A repeated start marker: the hint begins after the last one.
        assert_eq!(
            extract_hint("[HINT_START] draft [HINT_START] final [HINT_END]").as_deref(),
            Some("final")
        );
        // Brackets and markup inside the hint are kept.
        assert_eq!(
            extract_hint("[HINT_START]Use `ls [dir]` {not} \\boxed{1}[HINT_END]").as_deref(),
            Some("Use `ls [dir]` {not} \\boxed{1}")
        );
    }

    fn vote(d: Option<i32>, h: Option<&str>) -> (Option<i32>, Option<String>) {
        (d, h.map(str::to_string))
    }

    #[test]
    fn the_longest_positive_hint_over_ten_characters_wins() {
        let votes = [
            vote(Some(1), Some("Short one!")), // exactly 10 characters: too short
            vote(Some(-1), Some("A much longer hint from a negative vote.")),
            vote(
                None,
                Some("An even longer hint from a vote with no decision at all."),
            ),
            vote(Some(1), Some("  Check the path first.  ")),
            vote(Some(1), Some("Check it exists.")),
            vote(Some(1), None),
        ];
        assert_eq!(
            select_best_hint(&votes).as_deref(),
            Some("Check the path first.")
        );
        // Equal lengths: the earlier vote keeps its place.
        let tie = [
            vote(Some(1), Some("Say hello first.")),
            vote(Some(1), Some("Say goodbye now.")),
        ];
        assert_eq!(select_best_hint(&tie).as_deref(), Some("Say hello first."));
        assert_eq!(select_best_hint(&votes[..3]), None);
        assert_eq!(
            select_best_hint(&[vote(Some(1), Some("           x"))]),
            None
        );
        assert_eq!(
            select_best_hint(&[vote(Some(1), Some("eleven char"))]).as_deref(),
            Some("eleven char")
        );
        assert_eq!(select_best_hint(&[]), None);
        // Length is counted in characters, not bytes.
        assert_eq!(select_best_hint(&[vote(Some(1), Some("ééééééé"))]), None);
    }

    #[test]
    fn hints_go_to_the_last_user_message() {
        let msgs = vec![
            Message::new("system", "sys"),
            Message::new("user", "first"),
            Message::new("assistant", "a"),
            Message::new("user", "second  \n"),
            Message::new("assistant", "calling a tool"),
            Message::new("tool", "result"),
        ];
        let out = append_hint_to_messages(&msgs, "Be brief.  ");
        assert_eq!(out.len(), msgs.len());
        assert_eq!(
            out[3].content.as_str(),
            "second  \n\n\n[user's hint / instruction]\nBe brief."
        );
        for i in [0, 1, 2, 4, 5] {
            assert_eq!(out[i], msgs[i], "message {i} is unchanged");
        }
        assert_eq!(
            msgs[3].content.as_str(),
            "second  \n",
            "the input is not modified"
        );

        let no_user = vec![Message::new("system", "sys"), Message::new("tool", "out")];
        let out = append_hint_to_messages(&no_user, "Hint.");
        assert_eq!(out[0], no_user[0]);
        assert_eq!(
            out[1].content.as_str(),
            "out\n\n[user's hint / instruction]\nHint."
        );
        assert_eq!(out[1].role.as_str(), "tool");

        let out = append_hint_to_messages(&[], "Hint.");
        assert_eq!(
            out,
            vec![Message::new("user", "[user's hint / instruction]\nHint.")]
        );
    }

    #[test]
    fn judges_read_reasoning_text_and_tool_calls() {
        let mut m = Message::new("assistant", "  Let me look.  ");
        m.reasoning_content = ROption::RSome("The user wants a file.".into());
        m.tool_calls_json = ROption::RSome(
            r#"[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\": \"a.txt\"}"}},
                {"id":"c2","type":"function","function":{"name":"ls","arguments":"not json"}}]"#
                .into(),
        );
        assert_eq!(
            render_for_judge(&m),
            "<think>\nThe user wants a file.\n</think>\nLet me look.\n\
             <tool_call>{\"name\": \"read\", \"arguments\": {\"path\":\"a.txt\"}}</tool_call>\n\
             <tool_call>{\"name\": \"ls\", \"arguments\": \"not json\"}</tool_call>"
        );
        assert_eq!(render_for_judge(&Message::new("assistant", "Hi.")), "Hi.");
        let mut blank = Message::new("assistant", "");
        blank.reasoning_content = ROption::RSome("  ".into());
        blank.tool_calls_json = ROption::RSome("[]".into());
        assert_eq!(render_for_judge(&blank), "");
        blank.tool_calls_json = ROption::RSome("<garbled>".into());
        assert_eq!(render_for_judge(&blank), "<tool_call><garbled></tool_call>");
        blank.tool_calls_json = ROption::RSome(r#"{"name":"x","arguments":{"a":1}}"#.into());
        assert_eq!(
            render_for_judge(&blank),
            "<tool_call>{\"name\": \"x\", \"arguments\": {\"a\":1}}</tool_call>"
        );
    }

    #[test]
    fn long_texts_keep_their_start_and_end() {
        assert_eq!(clip_middle("short", 10), "short");
        assert_eq!(clip_middle("anything", 0), "anything");
        let text = "é".repeat(10) + &"x".repeat(80) + &"z".repeat(10);
        let clipped = clip_middle(&text, 20);
        assert!(clipped.starts_with(&"é".repeat(10)), "{clipped}");
        assert!(clipped.ends_with(&"z".repeat(10)), "{clipped}");
        assert!(
            clipped.contains("[... 80 characters omitted ...]"),
            "{clipped}"
        );
        assert!(!clipped.contains('x'), "{clipped}");
    }

    fn turn(next: Option<(&str, &str)>) -> Turn {
        Turn {
            session_id: "s".into(),
            turn_index: 3,
            turn_type: TurnType::Main,
            prompt_messages: vec![
                Message::new("system", "You help."),
                Message::new("user", "List the files."),
            ]
            .into(),
            tools_json: r#"[{"type":"function","function":{"name":"ls"}}]"#.into(),
            response: Message::new("assistant", "Here they are: a, b."),
            prompt_ids: vec![1, 2, 3].into(),
            response_ids: vec![901, 7, 902, 13].into(),
            response_logprobs: vec![-0.1, -0.2, -0.3, -0.4].into(),
            weight_version: 4,
            next_state: next
                .map(|(role, text)| NextState {
                    role: role.into(),
                    content: text.into(),
                    messages: vec![Message::new(role, text)].into(),
                })
                .into(),
            trainable: true,
        }
    }

    fn request(next: Option<(&str, &str)>) -> ScoreRequest {
        ScoreRequest {
            turn: turn(next),
            response_text: "Here they are: a, b.<|im_end|>".into(),
            session_closed: next.is_none(),
            judge: JudgeSettings::default(),
        }
    }

    #[test]
    fn the_judge_reads_the_response_and_the_next_state_with_its_role() {
        let input = judge_input(&request(Some(("tool", "ERROR: no such dir"))), 0).unwrap();
        assert_eq!(
            input,
            JudgeInput {
                response: "Here they are: a, b.".into(),
                role: "tool".into(),
                next_state: "ERROR: no such dir".into(),
            }
        );
        assert_eq!(judge_input(&request(None), 0), Err("no next state"));
        let mut side = request(Some(("user", "ok")));
        side.turn.turn_type = TurnType::Side;
        assert_eq!(judge_input(&side, 0), Err("side turn"));
        let mut untrainable = request(Some(("user", "ok")));
        untrainable.turn.trainable = false;
        assert!(judge_input(&untrainable, 0).is_err());
        // An unparsed response falls back to the rendered text; long texts are clipped.
        let mut raw = request(Some(("user", &"y".repeat(500))));
        raw.turn.response = Message::new("assistant", "");
        let input = judge_input(&raw, 100).unwrap();
        assert_eq!(input.response, "Here they are: a, b.<|im_end|>");
        assert!(
            input.next_state.contains("400 characters omitted"),
            "{}",
            input.next_state
        );
        let s = unjudged_score("no next state");
        assert!(!s.trainable && s.value == 0.0 && s.votes.is_empty());
        assert!(s.metadata_json.contains("no next state"));
    }

    fn input(role: &str) -> JudgeInput {
        JudgeInput {
            response: "RESPONSE-TEXT".into(),
            role: role.into(),
            next_state: "NEXT-STATE-TEXT".into(),
        }
    }

    #[test]
    fn the_outcome_judge_prompt_has_its_rules_and_sections() {
        let msgs = prm_judge_messages(&input("tool"));
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].role.as_str(), "system");
        assert_eq!(msgs[1].role.as_str(), "user");
        let sys = msgs[0].content.as_str();
        for needle in [
            "process reward model",
            "next state",
            "role \"user\"",
            "role \"tool\"",
            "\\boxed{1}",
            "\\boxed{-1}",
            "\\boxed{0}",
            "redo or retry",
            "repeats the same request",
            "negative feedback",
            "step by step",
        ] {
            assert!(sys.contains(needle), "system prompt lacks {needle:?}");
        }
        // The rules come in order: progress, then negative, then ambiguous.
        let (p, n, z) = (
            sys.find("- \\boxed{1}").unwrap(),
            sys.find("- \\boxed{-1}").unwrap(),
            sys.find("- \\boxed{0}").unwrap(),
        );
        assert!(p < n && n < z);
        let user = msgs[1].content.as_str();
        assert!(
            user.starts_with(
                "## Assistant output\nRESPONSE-TEXT\n\n## Next state [role: tool]\nNEXT-STATE-TEXT\n\n"
            ),
            "{user}"
        );
        let (a, b, c) = (
            user.find("(a) progress").unwrap(),
            user.find("(b) a correction, redo or change request")
                .unwrap(),
            user.find("(c) ambiguous").unwrap(),
        );
        assert!(a < b && b < c);
        assert!(user.ends_with("\\boxed{0} for (c)."), "{user}");
        assert!(prm_judge_messages(&input("user"))[1]
            .content
            .contains("[role: user]"));
    }

    #[test]
    fn the_hint_judge_prompt_has_its_format_and_sections() {
        let msgs = hint_judge_messages(&input("user"));
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].role.as_str(), "system");
        let sys = msgs[0].content.as_str();
        for needle in [
            "hindsight",
            "turn t",
            "turn t+1",
            "NOT information the assistant should have known",
            "\\boxed{1}",
            "\\boxed{-1}",
            "if and only if",
            "[HINT_START]",
            "[HINT_END]",
            "one to three sentences",
        ] {
            assert!(sys.contains(needle), "system prompt lacks {needle:?}");
        }
        assert!(!sys.contains("\\boxed{0}"), "the hint judge has no 0");
        let user = msgs[1].content.as_str();
        assert!(
            user.starts_with(
                "## Assistant response (turn t)\nRESPONSE-TEXT\n\n\
                 ## Next state (turn t+1) [role: user]\nNEXT-STATE-TEXT\n\n"
            ),
            "{user}"
        );
        assert!(user.contains("output your decision and, if it is positive, the hint"));
    }

    fn judge_of(j: ScriptedJudge) -> (Arc<ScriptedJudge>, Judge) {
        let j = Arc::new(j);
        let host = HostServices::builder().judge(j.clone()).build();
        (j, host.judge().unwrap())
    }

    #[test]
    fn outcome_votes_count_failures_and_garbage_as_invalid() {
        let (script, judge) = judge_of(ScriptedJudge::new(|_| {
            Ok(vec![
                Ok("bad \\boxed{-1}".into()),
                Err("timeout".into()),
                Ok("\\boxed{2}".into()),
                Ok("fine \\boxed{1}".into()),
                Ok("great \\boxed{ +1 }".into()),
            ])
        }));
        let settings = JudgeSettings {
            votes: 6,
            temperature: 0.3,
            max_tokens: 77,
            ..JudgeSettings::default()
        };
        let v = prm_votes(&judge, &input("user"), &settings).unwrap();
        assert_eq!(v.votes, vec![-1.0, 1.0, 1.0]);
        // A failed call, a 2 and a sixth completion the judge never returned.
        assert_eq!(v.invalid_votes, 3);
        assert_eq!(v.score, 1.0);
        assert_eq!(v.judge_text, "fine \\boxed{1}");
        let req = script.requests.lock().unwrap()[0].clone();
        assert_eq!(req.n, 6);
        assert_eq!(req.sampling.temperature, 0.3);
        assert_eq!(req.sampling.max_tokens, 77);
        assert_eq!(req.messages.to_vec(), prm_judge_messages(&input("user")));

        // 2 of 3 is below a 0.7 threshold: the score is 0 and the text the first answer.
        let strict = JudgeSettings {
            votes: 5,
            threshold: 0.7,
            ..settings
        };
        let v = prm_votes(&judge, &input("user"), &strict).unwrap();
        assert_eq!(v.score, 0.0);
        assert_eq!(v.judge_text, "bad \\boxed{-1}");

        let (_, failing) = judge_of(ScriptedJudge::new(|_| Err("judge down".into())));
        let e = prm_votes(&failing, &input("user"), &settings).unwrap_err();
        assert!(e.contains("judge down"), "{e}");
        let e = prm_votes(
            &judge,
            &input("user"),
            &JudgeSettings {
                votes: 0,
                ..settings
            },
        )
        .unwrap_err();
        assert!(e.contains("votes"), "{e}");

        let (_, all_failed) = judge_of(ScriptedJudge::new(|r| {
            Ok((0..r.n).map(|_| Err("overloaded".to_string())).collect())
        }));
        let v = prm_votes(&all_failed, &input("user"), &JudgeSettings::default()).unwrap();
        assert_eq!((v.score, v.invalid_votes, v.votes.len()), (0.0, 3, 0));
        assert!(v.judge_text.contains("overloaded"));
    }

    #[test]
    fn hint_votes_select_the_longest_positive_hint() {
        let (script, judge) = judge_of(ScriptedJudge::always(&[
            "\\boxed{-1}",
            "\\boxed{1} [HINT_START]Say which files.[HINT_END]",
            "garbage",
            "\\boxed{1} [HINT_START]List hidden files as well.[HINT_END]",
            "\\boxed{1} [HINT_START]Short.[HINT_END]",
        ]));
        let settings = JudgeSettings {
            votes: 5,
            ..JudgeSettings::default()
        };
        let v = hint_votes(&judge, &input("user"), &settings).unwrap();
        assert_eq!(v.hint.as_deref(), Some("List hidden files as well."));
        assert_eq!(v.decisions, vec![-1.0, 1.0, 1.0, 1.0]);
        assert_eq!(v.invalid_votes, 1);
        assert!(v.judge_text.contains("hidden files"));
        assert!(script.prompt(0).contains("## Assistant response (turn t)"));

        let (_, judge) = judge_of(ScriptedJudge::always(&[
            "\\boxed{-1}",
            "\\boxed{1} no hint",
        ]));
        let v = hint_votes(&judge, &input("user"), &settings).unwrap();
        assert_eq!(v.hint, None);
        assert_eq!(v.judge_text, "\\boxed{-1}");
    }

    fn teacher_of(p: ScriptedPolicy) -> (Arc<ScriptedPolicy>, Policy) {
        let p = Arc::new(p);
        let host = HostServices::builder().teacher(p.clone()).build();
        (p, host.teacher().unwrap())
    }

    #[test]
    fn the_teacher_scores_the_exact_response_under_the_hinted_prompt() {
        let (script, teacher) = teacher_of(ScriptedPolicy::default());
        let t = turn(Some(("user", "also hidden ones")));
        let scores = hinted_teacher_scores(&teacher, &t, "Include hidden files.", 0).unwrap();
        let rendered = script.rendered.lock().unwrap()[0].clone();
        assert_eq!(
            rendered,
            "tools: [{\"type\":\"function\",\"function\":{\"name\":\"ls\"}}]\n\
             system: You help.\n\
             user: List the files.\n\n[user's hint / instruction]\nInclude hidden files.\n\
             assistant: "
        );
        let req = script.scored.lock().unwrap()[0].clone();
        let expected_prompt: Vec<u32> = rendered.bytes().map(u32::from).collect();
        assert_eq!(req.prompt_ids.to_vec(), expected_prompt);
        assert_eq!(
            req.response_ids, t.response_ids,
            "the response ids pass unchanged"
        );
        assert_eq!(req.top_k, 0);
        // Taken as they come: token i's value is the one the host gave for token i.
        let want: Vec<f32> = (0..4)
            .map(|i| ScriptedPolicy::logprob(i, expected_prompt.len()))
            .collect();
        assert_eq!(scores.logprobs.to_vec(), want);
        assert!(scores.topk.is_none());

        let scores = hinted_teacher_scores(&teacher, &t, "Include hidden files.", 3).unwrap();
        assert_eq!(script.scored.lock().unwrap()[1].top_k, 3);
        let topk = scores.topk.into_option().unwrap();
        assert_eq!(
            (topk.k, topk.token_ids.len(), topk.logprobs.len()),
            (3, 12, 12)
        );
    }

    #[test]
    fn teacher_answers_of_the_wrong_size_are_errors() {
        let (_, teacher) = teacher_of(ScriptedPolicy {
            short_by: 1,
            ..Default::default()
        });
        let t = turn(None);
        let e = hinted_teacher_scores(&teacher, &t, "Hint here.", 0).unwrap_err();
        assert!(
            e.contains("3 log-probabilities for 4 response tokens"),
            "{e}"
        );

        // A teacher that returns fixed log-probabilities and never a top-k.
        struct Fixed(Vec<f32>);
        impl openclaw_plugin_api::host::PolicyService for Fixed {
            fn generate(&self, _: &[u32], _: &SamplingParams) -> Result<Generation, String> {
                Err("unused".into())
            }
            fn chat(
                &self,
                _: &[Message],
                _: &str,
                _: &SamplingParams,
            ) -> Result<Generation, String> {
                Err("unused".into())
            }
            fn score(&self, _: &ScoreTokens) -> Result<TokenScores, String> {
                Ok(TokenScores {
                    logprobs: self.0.clone().into(),
                    topk: ROption::RNone,
                })
            }
            fn render_chat(&self, _: &[Message], _: &str, _: bool) -> Result<String, String> {
                Ok("prompt".into())
            }
            fn tokenize(&self, _: &str) -> Result<Vec<u32>, String> {
                Ok(vec![1])
            }
            fn weight_version(&self) -> u64 {
                0
            }
        }
        let fixed = |lp: Vec<f32>| {
            HostServices::builder()
                .teacher(Arc::new(Fixed(lp)))
                .build()
                .teacher()
                .unwrap()
        };
        let teacher = fixed(vec![-1.0; 4]);
        hinted_teacher_scores(&teacher, &t, "Hint here.", 0).unwrap();
        let e = hinted_teacher_scores(&teacher, &t, "Hint here.", 5).unwrap_err();
        assert!(e.contains("no top-k"), "{e}");
        let e = hinted_teacher_scores(
            &fixed(vec![-1.0, f32::NAN, -1.0, -1.0]),
            &t,
            "Hint here.",
            0,
        )
        .unwrap_err();
        assert!(e.contains("token 1 is NaN"), "{e}");
        let e = hinted_teacher_scores(&fixed(vec![-1.0, -1.0, 0.5, -1.0]), &t, "Hint here.", 0)
            .unwrap_err();
        assert!(e.contains("token 2 is 0.5"), "{e}");
        let e = hinted_teacher_scores(&fixed(vec![-1.0; 5]), &t, "Hint here.", 0).unwrap_err();
        assert!(e.contains("5 log-probabilities for 4"), "{e}");
    }

    #[test]
    fn distillation_scores_the_teacher_only_with_a_hint() {
        let (_, teacher) = teacher_of(ScriptedPolicy::default());
        let t = turn(Some(("user", "also hidden ones")));
        let settings = JudgeSettings::default();
        let (_, judge) = judge_of(ScriptedJudge::always(&[
            "\\boxed{1} [HINT_START]Include hidden files too.[HINT_END]",
        ]));
        let d = distill(&judge, &teacher, &input("user"), &t, &settings, 2).unwrap();
        assert_eq!(d.verdict.hint.as_deref(), Some("Include hidden files too."));
        let scores = d.teacher.unwrap();
        assert_eq!(scores.logprobs.len(), 4);
        assert_eq!(scores.topk.into_option().unwrap().k, 2);
        let summary = d.verdict.summary();
        assert_eq!(summary["accepted"], true);
        assert_eq!(summary["positive_votes"], 3);

        let (script, teacher) = teacher_of(ScriptedPolicy::default());
        let (_, judge) = judge_of(ScriptedJudge::always(&["\\boxed{-1}"]));
        let d = distill(&judge, &teacher, &input("user"), &t, &settings, 2).unwrap();
        assert_eq!((d.verdict.hint, d.teacher), (None, None));
        assert!(
            script.scored.lock().unwrap().is_empty(),
            "no teacher call without a hint"
        );
    }

    #[test]
    fn run_both_runs_concurrently_and_reports_panics() {
        let (script, judge) = judge_of(
            ScriptedJudge::always(&["\\boxed{1}"]).with_rendezvous(Duration::from_secs(20)),
        );
        let settings = JudgeSettings::default();
        let (a, b) = run_both(
            || prm_votes(&judge, &input("user"), &settings),
            || prm_votes(&judge, &input("tool"), &settings),
        )
        .unwrap();
        assert_eq!((a.score, b.score), (1.0, 1.0));
        assert_eq!(script.calls(), 2);

        let e = run_both(|| -> Result<(), String> { panic!("boom") }, || Ok(())).unwrap_err();
        assert!(e.contains("boom"), "{e}");
        let e = run_both(
            || Ok(()),
            || -> Result<(), String> { Err("second failed".into()) },
        )
        .unwrap_err();
        assert_eq!(e, "second failed");
    }
}
