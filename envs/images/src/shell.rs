//! The few `sh` words a Dockerfile's `RUN` may hold: commands of plain words joined by `&&`
//! or `;`, with quotes and backslashes. Everything that would need a shell to mean what it says
//! (pipes, redirections, variables, substitutions, subshells, background jobs) is refused by
//! name, so no command is read as something it is not.

/// The commands of `script`, each its words with quotes and escapes removed; or what is
/// outside the subset, worded to follow "is outside the supported subset: ".
pub(crate) fn commands(script: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    // The word being read, and whether one was started (an empty `''` is a word).
    let mut word = String::new();
    let mut in_word = false;
    // Whether the command before the separator just read was joined by `&&` (an empty one is
    // then a syntax error, as in sh).
    let mut after_and = false;
    let mut chars = script.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => end_word(&mut word, &mut in_word, &mut words),
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err("an unterminated `'` quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err("an unterminated `\"` quote".into()),
                        },
                        Some('$') => return Err(expansion(&mut chars)),
                        Some('`') => {
                            return Err("`` ` `` (a command substitution)".into());
                        }
                        Some(c) => word.push(c),
                        None => return Err("an unterminated `\"` quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err("a `\\` at the end".into()),
            },
            '$' => return Err(expansion(&mut chars)),
            '`' => return Err("`` ` `` (a command substitution)".into()),
            '~' if !in_word => return Err("`~` (the home folder, expanded by the shell)".into()),
            '#' if !in_word => return Err("`#` (a comment inside RUN)".into()),
            '|' => {
                return Err(if chars.peek() == Some(&'|') {
                    "`||` (run on failure)".into()
                } else {
                    "`|` (a pipeline)".into()
                })
            }
            '>' | '<' => return Err(format!("`{c}` (a redirection)")),
            '(' | ')' => return Err(format!("`{c}` (a subshell)")),
            '{' | '}' if !in_word => return Err(format!("`{c}` (a command group)")),
            '&' => {
                if chars.peek() != Some(&'&') {
                    return Err("`&` (a background job)".into());
                }
                chars.next();
                end_word(&mut word, &mut in_word, &mut words);
                if words.is_empty() {
                    return Err("an empty command before `&&`".into());
                }
                commands.push(std::mem::take(&mut words));
                after_and = true;
            }
            ';' => {
                end_word(&mut word, &mut in_word, &mut words);
                if words.is_empty() && after_and {
                    return Err("an empty command after `&&`".into());
                }
                if !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
                after_and = false;
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
        if after_and && (in_word || !words.is_empty()) {
            after_and = false;
        }
    }
    end_word(&mut word, &mut in_word, &mut words);
    if !words.is_empty() {
        commands.push(words);
    } else if after_and {
        return Err("an empty command after `&&`".into());
    }
    Ok(commands)
}

/// What a `$` starts, named (the `$` itself was read).
fn expansion(chars: &mut std::iter::Peekable<std::str::Chars>) -> String {
    match chars.peek() {
        Some('(') => "`$(…)` (a command substitution)".into(),
        Some('{') => {
            let name: String = chars.by_ref().skip(1).take_while(|c| *c != '}').collect();
            format!("`${{{name}}}` (a variable, expanded by the shell)")
        }
        _ => {
            let name: String =
                std::iter::from_fn(|| chars.next_if(|c| c.is_ascii_alphanumeric() || *c == '_'))
                    .collect();
            format!("`${name}` (a variable, expanded by the shell)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Vec<Vec<String>> {
        commands(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn words_are_split_and_unquoted_and_commands_joined_by_and_or_semicolon() {
        assert_eq!(
            ok("apt-get update && apt-get install -y 'a b' \"c\\\"d\" e\\ f ;pip install x;"),
            [
                vec!["apt-get", "update"],
                vec!["apt-get", "install", "-y", "a b", "c\"d", "e f"],
                vec!["pip", "install", "x"],
            ]
        );
        assert_eq!(
            ok("rm -rf /var/lib/apt/lists/*"),
            [["rm", "-rf", "/var/lib/apt/lists/*"]]
        );
        assert_eq!(ok("pip install ''"), [["pip", "install", ""]]);
        assert!(ok("  ").is_empty());
    }

    #[test]
    fn what_needs_a_shell_is_named() {
        for (script, named) in [
            ("curl x | sh", "`|` (a pipeline)"),
            ("a || b", "`||`"),
            ("echo x > f", "`>` (a redirection)"),
            ("echo $HOME", "`$HOME`"),
            ("echo \"${X}\"", "`${X}`"),
            ("echo $(id)", "`$(…)`"),
            ("echo `id`", "command substitution"),
            ("(cd x)", "subshell"),
            ("sleep 1 &", "background"),
            ("&& a", "empty command"),
            ("a && && b", "empty command"),
            ("a &&", "empty command"),
            ("echo 'x", "unterminated"),
            ("ls ~/x", "`~`"),
            ("ls # x", "comment"),
        ] {
            let err = commands(script).expect_err(script);
            assert!(err.contains(named), "{script}: {err}");
        }
    }
}
