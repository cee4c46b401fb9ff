//! How the agent talks to the environment, as mini-swe-agent has it: every reply holds a
//! THOUGHT and exactly one ```` ```bash ```` block; the block runs in `/testbed` and the reply
//! gets its return code and output (past a limit, the head and the tail); a command whose
//! output starts with the submit marker ends the episode.

use crate::instances::Instance;

/// What the agent prints to submit (mini-swe-agent's current marker).
pub const SUBMIT: &str = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";
/// mini-swe-agent's older marker, accepted as well.
pub const SUBMIT_OLD: &str = "MINI_SWE_AGENT_FINAL_OUTPUT";

/// The first message of an episode: how to work, then the issue.
pub fn prompt(inst: &Instance) -> String {
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
        issue = inst.problem_statement.trim_end(),
        repo = inst.repo,
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

/// A reply that runs `command` (for scripted policies: the reference solution, tests).
pub fn reply(thought: &str, command: &str) -> String {
    format!("THOUGHT: {thought}\n\n```bash\n{command}\n```")
}

/// The command that applies `patch` with `git apply`, as a here-document whose end marker
/// appears nowhere in the patch.
pub fn apply_command(patch: &str) -> String {
    let mut mark = String::from("OPENCLAW_PATCH");
    while patch.lines().any(|l| l == mark) {
        mark.push('_');
    }
    let body = if patch.ends_with('\n') {
        patch.to_string()
    } else {
        format!("{patch}\n")
    };
    format!("git apply <<'{mark}'\n{body}{mark}")
}

/// The submit command of [`prompt`].
pub fn submit_command() -> String {
    format!("echo {SUBMIT} && git add -A && git diff --cached")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_read_as_mini_swe_agent_reads_them() {
        let one = "THOUGHT: look\n\n```bash\nls -la\n```\n";
        assert_eq!(bash_blocks(one), ["ls -la"]);
        let two = "```bash\nls\n```\nand\n```bash\npwd\n```";
        assert_eq!(bash_blocks(two), ["ls", "pwd"]);
        // Another language, a word starting with bash, and an unclosed block are not blocks.
        assert!(bash_blocks("```python\nprint(1)\n```").is_empty());
        assert!(bash_blocks("```bashrc\nx\n```").is_empty());
        assert!(bash_blocks("```bash\nls").is_empty());
        // A here-document with backticks inside a line stays in the block.
        let heredoc = "```bash\ncat <<'EOF' > f.md\nuse ``` fences\nEOF\n```";
        assert_eq!(
            bash_blocks(heredoc),
            ["cat <<'EOF' > f.md\nuse ``` fences\nEOF"]
        );
        assert_eq!(bash_blocks("```bash  \n\n```"), [""]);
    }

    #[test]
    fn a_submit_is_the_marker_on_the_first_line() {
        assert!(submits(
            "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x"
        ));
        assert!(submits("\nMINI_SWE_AGENT_FINAL_OUTPUT\n"));
        assert!(!submits(
            "building...\nCOMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
        ));
    }

    #[test]
    fn long_output_keeps_its_head_and_tail() {
        let out = observation(Some(0), "", "short\n", 100);
        assert_eq!(
            out,
            "<returncode>0</returncode>\n<output>\nshort\n</output>"
        );
        let long: String = (0..100).map(|i| format!("{i:03}")).collect();
        let out = observation(Some(1), "", &long, 20);
        assert!(
            out.contains("<output_head>\n0000010020\n</output_head>"),
            "{out}"
        );
        assert!(
            out.contains("<output_tail>\n6097098099\n</output_tail>"),
            "{out}"
        );
        assert!(out.contains("280 characters elided"), "{out}");
        assert!(observation(None, "timed out", "", 10).contains("<note>timed out</note>"));
    }

    #[test]
    fn the_apply_command_picks_a_mark_the_patch_does_not_hold() {
        let c = apply_command("OPENCLAW_PATCH\n+x");
        assert!(c.starts_with("git apply <<'OPENCLAW_PATCH_'\n"), "{c}");
        assert!(c.ends_with("+x\nOPENCLAW_PATCH_"), "{c}");
        assert_eq!(bash_blocks(&reply("fix", &c)), [c]);
    }
}
