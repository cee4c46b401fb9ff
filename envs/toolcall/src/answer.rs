//! Answers: the last `\boxed{…}` of the agent's messages, compared strictly with the label.

/// The content of the last `\boxed{…}` in `text` (braces balanced inside), if any.
pub fn last_boxed(text: &str) -> Option<String> {
    let mut found = None;
    let mut rest = text;
    while let Some(at) = rest.find("\\boxed{") {
        let body = &rest[at + "\\boxed{".len()..];
        let mut depth = 1;
        let mut end = None;
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => {
                found = Some(body[..e].trim().to_string());
                rest = &body[e + 1..];
            }
            // An unclosed box is no answer; nothing after it can close an earlier one.
            None => break,
        }
    }
    found
}

/// The label as compared: a GSM8K answer's worked solution before `#### <n>` dropped.
pub fn label(answer: &str) -> String {
    match answer.rsplit_once("####") {
        Some((_, tail)) => tail.trim().to_string(),
        None => answer.trim().to_string(),
    }
}

/// Whether `answer` is `label`: the same text once trimmed of spaces and an enclosing `$…$`,
/// or, when both are numbers (thousands commas allowed), the same number. Nothing looser
/// (no units, words or expressions are evaluated): a strict match, as the original scores.
pub fn matches(answer: &str, label: &str) -> bool {
    let (a, l) = (normalise(answer), normalise(label));
    if a == l {
        return true;
    }
    match (number(&a), number(&l)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

fn normalise(s: &str) -> String {
    let s = s.trim();
    let s = s
        .strip_prefix('$')
        .and_then(|t| t.strip_suffix('$'))
        .unwrap_or(s);
    s.trim().to_string()
}

fn number(s: &str) -> Option<f64> {
    let plain: String = s.chars().filter(|&c| c != ',').collect();
    // Commas only as thousands separators: "1,000" but not "1,0".
    if plain.len() != s.len() {
        let int_part = s.split('.').next().unwrap_or(s);
        let groups: Vec<&str> = int_part.trim_start_matches('-').split(',').collect();
        if groups[1..].iter().any(|g| g.len() != 3) || groups[0].is_empty() {
            return None;
        }
    }
    plain.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// How a wrong or missing answer is scored.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// +1 right, -1 otherwise.
    PlusMinusOne,
    /// The original's: +1 right, otherwise `min(-0.6, -1 + (calls - 2) · 0.05)`, so an agent
    /// that tried the interpreter loses less than one that did not.
    Retool,
}

/// The outcome reward of an episode.
pub fn reward(correct: bool, tool_calls: u32, shape: Shape) -> f32 {
    match (correct, shape) {
        (true, _) => 1.0,
        (false, Shape::PlusMinusOne) => -1.0,
        (false, Shape::Retool) => (-1.0 + (tool_calls as f32 - 2.0) * 0.05).min(-0.6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_balanced_box_is_the_answer() {
        assert_eq!(
            last_boxed("try \\boxed{3}, no: Answer: \\boxed{\\frac{1}{2}}").as_deref(),
            Some("\\frac{1}{2}")
        );
        assert_eq!(last_boxed("Answer: \\boxed{ 42 }").as_deref(), Some("42"));
        assert_eq!(last_boxed("no box here"), None);
        assert_eq!(
            last_boxed("\\boxed{7} then \\boxed{unclosed").as_deref(),
            Some("7")
        );
    }

    #[test]
    fn matching_is_strict_but_reads_numbers_as_numbers() {
        assert!(matches("36", "36"));
        assert!(matches("1,000", "1000"));
        assert!(matches("$18$", "18"));
        assert!(matches("18.0", "18"));
        assert!(!matches("18 dollars", "18"));
        assert!(!matches("1,0", "10"));
        assert!(!matches("17", "18"));
        assert!(!matches("", "18"));
        assert_eq!(label("He pays 2*9 = 18.\n#### 18"), "18");
        assert_eq!(label(" 36 "), "36");
    }

    #[test]
    fn the_retool_shape_softens_wrong_answers_that_used_the_tool() {
        assert_eq!(reward(true, 0, Shape::Retool), 1.0);
        assert_eq!(reward(false, 0, Shape::PlusMinusOne), -1.0);
        assert!((reward(false, 0, Shape::Retool) + 1.1).abs() < 1e-6);
        assert!((reward(false, 4, Shape::Retool) + 0.9).abs() < 1e-6);
        assert_eq!(reward(false, 40, Shape::Retool), -0.6);
    }
}
