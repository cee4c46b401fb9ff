//! Scoring as SWE-bench does, with two holes closed: the agent's diff loses its changes to test
//! files and test configuration before it is applied (the tests that score it are the task's,
//! not the agent's), and an instance is resolved only when every FAIL_TO_PASS and PASS_TO_PASS
//! test is reported as passed (one that did not run counts as failed).

use std::collections::BTreeMap;

/// Whether `path` (relative to the repository) is a test file or pytest's configuration of
/// tests: the agent's changes there are not applied when scoring.
pub fn is_test_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let name = parts.last().copied().unwrap_or("");
    parts[..parts.len().saturating_sub(1)]
        .iter()
        .any(|d| *d == "tests" || *d == "test" || *d == "testing")
        || name.starts_with("test_")
        || name.ends_with("_test.py")
        || name == "conftest.py"
        || name == "pytest.ini"
        || name == "tox.ini"
}

/// The files of a `git diff`, each with its section of the text.
pub fn sections(diff: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in diff.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            // `a/<path> b/<path>`; the b side names the file after the change.
            let path = rest
                .trim_end()
                .rsplit_once(" b/")
                .map(|(_, b)| b.to_string())
                .unwrap_or_else(|| rest.trim_end().to_string());
            out.push((path, String::new()));
        }
        if let Some(last) = out.last_mut() {
            last.1.push_str(line);
        }
    }
    out
}

/// `diff` without its changes to test files, and the paths left out.
pub fn without_tests(diff: &str) -> (String, Vec<String>) {
    let mut kept = String::new();
    let mut dropped = Vec::new();
    for (path, text) in sections(diff) {
        // A rename out of or into a test path counts by either side.
        let from = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("diff --git a/"))
            .and_then(|l| l.rsplit_once(" b/"))
            .map(|(a, _)| a.to_string())
            .unwrap_or_default();
        if is_test_path(&path) || is_test_path(&from) {
            dropped.push(path);
        } else {
            kept.push_str(&text);
        }
    }
    (kept, dropped)
}

/// Each test's status in pytest's `-rA` summary (`PASSED`, `FAILED`, `ERROR`, `SKIPPED`,
/// `XFAIL`, `XPASS`), by node id.
pub fn statuses(output: &str) -> BTreeMap<String, String> {
    const KINDS: [&str; 6] = ["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"];
    let mut out = BTreeMap::new();
    for line in output.lines() {
        let Some((kind, rest)) = line.split_once(' ') else {
            continue;
        };
        if !KINDS.contains(&kind) {
            continue;
        }
        // `FAILED path::test - message`: the id ends before " - ".
        let id = rest.split(" - ").next().unwrap_or(rest).trim();
        if id.is_empty() || id.starts_with('[') {
            continue;
        }
        // A test reported twice (a failure in teardown after a pass) keeps the worse status.
        let worse = out.get(id).is_some_and(|s: &String| s != "PASSED");
        if !worse {
            out.insert(id.to_string(), kind.to_string());
        }
    }
    out
}

/// The verdict: every listed test passed. Each test's status (`MISSING` when not reported).
pub fn verdict(
    fail_to_pass: &[String],
    pass_to_pass: &[String],
    seen: &BTreeMap<String, String>,
) -> (bool, Vec<(String, String, &'static str)>) {
    let mut rows = Vec::new();
    let mut resolved = true;
    for (list, kind) in [
        (fail_to_pass, "FAIL_TO_PASS"),
        (pass_to_pass, "PASS_TO_PASS"),
    ] {
        for id in list {
            let status = seen.get(id).cloned().unwrap_or_else(|| "MISSING".into());
            resolved &= status == "PASSED";
            rows.push((id.clone(), status, kind));
        }
    }
    (resolved && !rows.is_empty(), rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIFF: &str = "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/tests/conftest.py b/tests/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/conftest.py\n@@ -0,0 +1 @@\n+import os\ndiff --git a/conftest.py b/conftest.py\n--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+x\n";

    #[test]
    fn changes_to_tests_are_left_out_of_the_scored_diff() {
        let (kept, dropped) = without_tests(DIFF);
        assert_eq!(dropped, ["tests/conftest.py", "conftest.py"]);
        assert!(kept.starts_with("diff --git a/pkg/core.py") && kept.ends_with("+b\n"));
        assert_eq!(sections(DIFF).len(), 3);
        assert!(is_test_path("test_x.py") && is_test_path("a/testing/x.py"));
        assert!(!is_test_path("pkg/contest.py") && !is_test_path("latest/x.py"));
        let rename = "diff --git a/tests/t.py b/pkg/t.py\nrename from tests/t.py\n";
        assert_eq!(without_tests(rename).1, ["pkg/t.py"]);
    }

    #[test]
    fn the_summary_gives_each_test_its_status_and_missing_tests_fail() {
        let out = "....\n=== short test summary info ===\nPASSED tests/a.py::t1\nFAILED tests/a.py::t2 - AssertionError: x - y\nPASSED tests/a.py::t3[1-2]\nERROR tests/a.py::t3[1-2] - teardown\n=== 1 failed ===\n";
        let s = statuses(out);
        assert_eq!(s["tests/a.py::t1"], "PASSED");
        assert_eq!(s["tests/a.py::t2"], "FAILED");
        assert_eq!(s["tests/a.py::t3[1-2]"], "ERROR");
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (ok, rows) = verdict(&ids(&["tests/a.py::t1"]), &[], &s);
        assert!(ok && rows.len() == 1);
        let (ok, rows) = verdict(&ids(&["tests/a.py::t1"]), &ids(&["tests/a.py::gone"]), &s);
        assert!(!ok);
        assert_eq!(rows[1].1, "MISSING");
        assert!(!verdict(&[], &[], &s).0, "nothing to run is never resolved");
    }
}
