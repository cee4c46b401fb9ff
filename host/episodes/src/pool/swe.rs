//! The original's SWE pool dialect (`/allocate {image, instance_id}`, `/exec`, `/diff`,
//! `/evaluate {patch, eval_script}`), and mini-swe-agent's side of it that a run here keeps
//! itself when a remote SWE worker only runs commands: one ```` ```bash ```` block per reply,
//! the observation's `<returncode>`/`<output>` format, the format reminder and the submit
//! marker.
//!
//! These are copies of `envs/swe/src/protocol.rs` (the host depends on no environment plugin):
//! `host/cli/tests/env_pool.rs` runs the same scripted episode through a pool in this dialect
//! and with the plugin loaded here, and compares the two conversations word for word.

/// Where the repository is (SWE-bench's images and `envs/swe` use `/testbed`).
pub const TESTBED: &str = "/testbed";
/// What the agent prints to submit (mini-swe-agent's current marker).
pub const SUBMIT: &str = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";
/// mini-swe-agent's older marker, accepted as well.
pub const SUBMIT_OLD: &str = "MINI_SWE_AGENT_FINAL_OUTPUT";
/// Characters of a command's output shown, past that the head and tail halves
/// (mini-swe-agent's 10,000; `envs/swe`'s `output_chars`).
pub const OUTPUT_CHARS: usize = 10_000;
/// Replies of an episode (mini-swe-agent's step limit; `envs/swe`'s `max_turns`).
pub const MAX_TURNS: u32 = 20;
/// Replies without exactly one block before the episode ends (`envs/swe`'s
/// `max_format_errors`).
pub const MAX_FORMAT_ERRORS: u32 = 3;
/// Seconds a command may run, asked of the remote worker (`envs/swe`'s `exec_seconds`).
pub const EXEC_SECONDS: u64 = 40;
/// Seconds the scoring may take, asked of the remote worker.
pub const EVAL_SECONDS: u64 = 300;

/// The first message of an episode whose task is a SWE-bench row (`problem_statement`,
/// `repo`): how to work, then the issue (as `envs/swe` words it).
pub fn prompt(problem_statement: &str, repo: &str) -> String {
    format!(
        "<pr_description>\n{issue}\n</pr_description>\n\n\
<instructions>\n\
You are working in the repository {repo}, checked out in /testbed (your current directory).\n\
Make changes to the non-test files so that the issue in the <pr_description> is resolved, in a \
way that is general and consistent with the codebase. Do not modify the tests.\n\n\
Each of your replies must contain a THOUGHT section explaining your reasoning, then EXACTLY ONE \
bash code block with ONE command (or commands joined with && or ||). Each command runs in a new \
shell in /testbed: directory changes and variables do not persist. You have no network.\n\n\
<format_example>\n\
THOUGHT: I need to find where the function is defined.\n\n\
```bash\n\
grep -rn \"def parse\" .\n\
```\n\
</format_example>\n\n\
Recommended workflow: find and read the relevant code; write a script that reproduces the \
issue; edit the source (for example with sed or a here-document); run the script and the tests \
again; then submit.\n\n\
When you are done, submit your work with exactly this command, alone in its block:\n\n\
```bash\n\
echo {SUBMIT} && git add -A && git diff --cached\n\
```\n\
You cannot continue working after submitting.\n\
</instructions>",
        issue = problem_statement.trim_end(),
    )
}

/// The Docker image SWE-bench publishes for an instance
/// (`swebench/sweb.eval.x86_64.<id with __ as _1776_>:latest`), which the original's SWE pool
/// starts for `/allocate`.
pub fn image(instance_id: &str) -> String {
    format!(
        "swebench/sweb.eval.x86_64.{}:latest",
        instance_id.replace("__", "_1776_").to_lowercase()
    )
}

/// The bodies of the ```` ```bash ```` blocks of `text` (mini-swe-agent reads
/// ```` ```bash\s*\n(.*?)\n``` ````).
pub fn bash_blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("```bash") {
        let after = &rest[at + "```bash".len()..];
        // Only whitespace up to the end of the line: "```bashrc" is not a block.
        let Some(nl) = after.find('\n') else { break };
        if !after[..nl].trim().is_empty() {
            rest = after;
            continue;
        }
        let body = &after[nl + 1..];
        // The closing fence: at the start of a line (or the block is empty).
        let end = if body.starts_with("```") {
            Some(0)
        } else {
            body.find("\n```").map(|e| e + 1)
        };
        match end {
            Some(e) => {
                out.push(body[..e].trim_end_matches('\n').to_string());
                rest = &body[e + 3..];
            }
            None => break,
        }
    }
    out
}

/// The reply to a reply that does not hold exactly one block (`found` of them).
pub fn format_error(found: usize) -> String {
    format!(
        "Please always provide EXACTLY ONE action in triple backticks, found {found} actions.\n\n\
Please format your action in triple backticks as shown in <response_example>.\n\n\
<response_example>\n\
Here are some thoughts about why you want to perform the action.\n\n\
```bash\n\
<action>\n\
```\n\
</response_example>\n\n\
If you have completed your assignment, submit with `echo {SUBMIT} && git add -A && git diff --cached` \
(alone in its block)."
    )
}

/// Whether a command's output submits the episode: its first line is a submit marker.
pub fn submits(output: &str) -> bool {
    let first = output.trim_start().lines().next().unwrap_or("").trim();
    first == SUBMIT || first == SUBMIT_OLD
}

/// The observation of a command: its return code and output, cut to the head and the tail
/// (half of `limit` characters each) past `limit`.
pub fn observation(returncode: Option<i32>, note: &str, output: &str, limit: usize) -> String {
    let code = match returncode {
        Some(c) => c.to_string(),
        None => "-1".into(),
    };
    let mut text = format!("<returncode>{code}</returncode>\n");
    if !note.is_empty() {
        text.push_str(&format!("<note>{note}</note>\n"));
    }
    let n = output.chars().count();
    if n <= limit {
        text.push_str(&format!("<output>\n{output}</output>"));
        return text;
    }
    let half = limit / 2;
    let head: String = output.chars().take(half).collect();
    let tail: String = output.chars().skip(n - half).collect();
    text.push_str(&format!(
        "<warning>\nThe output of your last command was too long. Try a command that prints less \
(grep, head, tail, sed -n). If you are editing files, do not print the whole file.\n</warning>\n\
<output_head>\n{head}\n</output_head>\n<elided_chars>\n{} characters elided\n</elided_chars>\n\
<output_tail>\n{tail}\n</output_tail>",
        n - 2 * half
    ));
    text
}

/// What [`observation`] wrote, read back: the return code, the note, and the output (past the
/// limit, its head and tail around a line saying how much was left out). `None` for any other
/// text (a format reminder).
pub fn read_observation(text: &str) -> Option<(i32, String, String)> {
    let rest = text.strip_prefix("<returncode>")?;
    let (code, rest) = rest.split_once("</returncode>\n")?;
    let code: i32 = code.trim().parse().ok()?;
    let (note, rest) = match rest.strip_prefix("<note>") {
        Some(r) => {
            let (n, r) = r.split_once("</note>\n")?;
            (n.to_string(), r)
        }
        None => (String::new(), rest),
    };
    if let Some(body) = rest.strip_prefix("<output>\n") {
        return Some((code, note, body.strip_suffix("</output>")?.to_string()));
    }
    let between = |open: &str, close: &str| -> Option<String> {
        let start = rest.find(open)? + open.len();
        let len = rest[start..].rfind(close)?;
        Some(rest[start..start + len].to_string())
    };
    let head = between("<output_head>\n", "\n</output_head>")?;
    let tail = between("<output_tail>\n", "\n</output_tail>")?;
    let elided = between("<elided_chars>\n", "\n</elided_chars>").unwrap_or_default();
    Some((code, note, format!("{head}\n[… {elided} …]\n{tail}")))
}

/// `s` as one shell word.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_read_as_mini_swe_agent_reads_them() {
        assert_eq!(
            bash_blocks("THOUGHT: look\n\n```bash\nls -la\n```\n"),
            ["ls -la"]
        );
        assert_eq!(
            bash_blocks("```bash\nls\n```\nand\n```bash\npwd\n```"),
            ["ls", "pwd"]
        );
        assert!(bash_blocks("```python\nprint(1)\n```").is_empty());
        assert!(bash_blocks("```bashrc\nx\n```").is_empty());
        assert!(bash_blocks("```bash\nls").is_empty());
        let heredoc = "```bash\ncat <<'EOF' > f.md\nuse ``` fences\nEOF\n```";
        assert_eq!(
            bash_blocks(heredoc),
            ["cat <<'EOF' > f.md\nuse ``` fences\nEOF"]
        );
    }

    #[test]
    fn an_observation_reads_back_as_it_was_written() {
        let o = observation(Some(2), "", "a\nb\n", 100);
        assert_eq!(
            read_observation(&o),
            Some((2, String::new(), "a\nb\n".into()))
        );
        let o = observation(None, "timed out", "</output>x", 100);
        assert_eq!(
            read_observation(&o),
            Some((-1, "timed out".into(), "</output>x".into()))
        );
        let long: String = (0..100).map(|i| format!("{i:03}")).collect();
        let (code, _, out) = read_observation(&observation(Some(0), "", &long, 20)).unwrap();
        assert_eq!(code, 0);
        assert_eq!(out, "0000010020\n[… 280 characters elided …]\n6097098099");
        assert_eq!(read_observation(&format_error(2)), None);
    }

    #[test]
    fn submits_and_images_and_quotes() {
        assert!(submits(
            "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x"
        ));
        assert!(!submits("x\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"));
        assert_eq!(
            image("django__django-11099"),
            "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
        );
        assert_eq!(sh_quote("it's"), "'it'\\''s'");
    }
}
