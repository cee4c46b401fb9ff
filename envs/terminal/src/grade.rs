//! Reading a pytest run's result: the `short test summary info` lines that `-rA` prints,
//! `PASSED|FAILED|ERROR|… path::name` (terminal-bench's pytest parser reads the same).

/// One test's outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The test's id (`path::name`).
    pub test: String,
    /// Whether it passed.
    pub passed: bool,
    /// The word pytest gave (`PASSED`, `FAILED`, `ERROR`, `XFAIL`, …).
    pub status: String,
}

/// The outcomes in `output`, in order; empty when there is no summary (pytest never ran, or
/// was killed).
pub fn pytest_summary(output: &str) -> Vec<Outcome> {
    let Some(at) = output.rfind("short test summary info") else {
        return Vec::new();
    };
    output[at..]
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (status, rest) = line.split_once(' ')?;
            let counted = matches!(
                status,
                "PASSED" | "FAILED" | "ERROR" | "XPASS" | "XFAIL" | "SKIPPED"
            );
            // `FAILED path::name - AssertionError: …`: the id is the first word.
            let test = rest.split(" - ").next()?.trim();
            (counted && !test.is_empty()).then(|| Outcome {
                test: test.to_string(),
                passed: matches!(status, "PASSED" | "XFAIL"),
                status: status.to_string(),
            })
        })
        .collect()
}

/// The share of tests passed (0 when none ran).
pub fn score(outcomes: &[Outcome]) -> f64 {
    if outcomes.is_empty() {
        return 0.0;
    }
    outcomes.iter().filter(|o| o.passed).count() as f64 / outcomes.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_gives_the_share_passed() {
        let out = "============ test session starts ============\n\
                   collected 3 items\n\
                   ../tests/test_outputs.py .F.\n\
                   =========== short test summary info ============\n\
                   PASSED ../tests/test_outputs.py::test_a\n\
                   FAILED ../tests/test_outputs.py::test_b - AssertionError: assert 1 == 2\n\
                   PASSED ../tests/test_outputs.py::test_c\n\
                   ======= 1 failed, 2 passed in 0.03s =======\n";
        let o = pytest_summary(out);
        assert_eq!(o.len(), 3);
        assert_eq!(o[1].test, "../tests/test_outputs.py::test_b");
        assert!(!o[1].passed);
        assert!((score(&o) - 2.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn no_summary_scores_zero_and_errors_count_as_failures() {
        assert!(pytest_summary("bash: pytest: command not found").is_empty());
        assert_eq!(score(&[]), 0.0);
        let o = pytest_summary(
            "== short test summary info ==\nERROR ../tests/test_outputs.py - ImportError\n== 1 error ==",
        );
        assert_eq!((o.len(), score(&o)), (1, 0.0));
    }
}
