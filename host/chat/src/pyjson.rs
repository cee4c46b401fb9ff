//! Python-compatible text for template values: `json.dumps` (HF's `tojson`) and `str()`.
//!
//! Chat templates were written against Python: transformers' `tojson` is
//! `json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`, which
//! differs from minijinja's built-in filter (`", "` and `": "` separators, no HTML escaping,
//! Python float formatting), and `{{ x }}` prints `None`, `True`, `1e-05` the Python way.

use std::fmt::Write;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

/// Options of Python's `json.dumps` that HF's `tojson` exposes.
#[derive(Debug, Clone)]
pub(crate) struct DumpOptions {
    pub ensure_ascii: bool,
    /// Indentation string per level; `None` for one line.
    pub indent: Option<String>,
    pub item_separator: String,
    pub key_separator: String,
    pub sort_keys: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        Self {
            ensure_ascii: false,
            indent: None,
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            sort_keys: false,
        }
    }
}

/// `json.dumps(value, **options)`.
pub(crate) fn dumps(value: &Value, options: &DumpOptions) -> Result<String, Error> {
    let mut out = String::new();
    dump_value(&mut out, value, options, 0)?;
    Ok(out)
}

fn dump_value(out: &mut String, value: &Value, o: &DumpOptions, depth: usize) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => dump_number(out, value, true),
        ValueKind::String => dump_str(out, value.as_str().unwrap_or_default(), o.ensure_ascii),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            dump_container(out, '[', ']', items.len(), o, depth, |out, i| {
                dump_value(out, &items[i], o, depth + 1)
            })?;
        }
        ValueKind::Map => {
            let mut pairs = Vec::new();
            for key in value.try_iter()? {
                let item = value.get_item(&key)?;
                pairs.push((json_key(&key)?, item));
            }
            if o.sort_keys {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            dump_container(out, '{', '}', pairs.len(), o, depth, |out, i| {
                dump_str(out, &pairs[i].0, o.ensure_ascii);
                out.push_str(&o.key_separator);
                dump_value(out, &pairs[i].1, o, depth + 1)
            })?;
        }
        ValueKind::Undefined => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "tojson: Object of type Undefined is not JSON serializable",
            ))
        }
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a {other} value is not JSON serializable"),
            ))
        }
    }
    Ok(())
}

fn dump_container(
    out: &mut String,
    open: char,
    close: char,
    len: usize,
    o: &DumpOptions,
    depth: usize,
    mut item: impl FnMut(&mut String, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if len == 0 {
        out.push(close);
        return Ok(());
    }
    for i in 0..len {
        if i > 0 {
            out.push_str(&o.item_separator);
        }
        if let Some(indent) = &o.indent {
            out.push('\n');
            for _ in 0..=depth {
                out.push_str(indent);
            }
        }
        item(out, i)?;
    }
    if let Some(indent) = &o.indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(indent);
        }
    }
    out.push(close);
    Ok(())
}

/// Python's json turns str, int, float, bool and None keys into strings.
fn json_key(key: &Value) -> Result<String, Error> {
    Ok(match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
        ValueKind::None => "null".to_owned(),
        ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_owned(),
        ValueKind::Number => {
            let mut s = String::new();
            dump_number(&mut s, key, true);
            s
        }
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: keys must be str, int, float, bool or None, not {other}"),
            ))
        }
    })
}

fn dump_number(out: &mut String, value: &Value, json: bool) {
    if value.is_integer() {
        let _ = write!(out, "{value}");
    } else if let Ok(f) = f64::try_from(value.clone()) {
        out.push_str(&float_repr(f, json));
    } else {
        let _ = write!(out, "{value}");
    }
}

/// Python's `float.__repr__` (shortest round-trip digits; exponent form below 1e-4 and from
/// 1e16 on). `json` selects json.dumps' spelling of NaN and infinities.
pub(crate) fn float_repr(f: f64, json: bool) -> String {
    if f.is_nan() {
        return if json { "NaN" } else { "nan" }.into();
    }
    if f.is_infinite() {
        let s = if json { "Infinity" } else { "inf" };
        return if f < 0.0 { format!("-{s}") } else { s.into() };
    }
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-5".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').expect("`{:e}` output has an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` exponent is an integer");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1; // position of the decimal point within `digits`
        let (int_part, frac_part) = if point <= 0 {
            (
                "0".to_owned(),
                format!("{}{digits}", "0".repeat((-point) as usize)),
            )
        } else if point as usize >= digits.len() {
            (
                format!("{digits}{}", "0".repeat(point as usize - digits.len())),
                String::new(),
            )
        } else {
            (
                digits[..point as usize].to_owned(),
                digits[point as usize..].to_owned(),
            )
        };
        let frac_part = if frac_part.is_empty() {
            "0".to_owned()
        } else {
            frac_part
        };
        format!("{sign}{int_part}.{frac_part}")
    } else {
        let (head, tail) = digits.split_at(1);
        let mantissa = if tail.is_empty() {
            head.to_owned()
        } else {
            format!("{head}.{tail}")
        };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

/// A JSON string literal the way `json.dumps` writes it.
fn dump_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !c.is_ascii() => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `str(value)` for values whose Jinja2 rendering differs from minijinja's
/// (`None`, `True`, floats, and containers, which Python prints with `repr`). `None` when
/// minijinja's own formatting already matches.
pub(crate) fn python_str(value: &Value) -> Option<String> {
    match value.kind() {
        ValueKind::None | ValueKind::Bool => Some(python_repr(value)),
        ValueKind::Number if !value.is_integer() => Some(python_repr(value)),
        ValueKind::Seq | ValueKind::Map => Some(python_repr(value)),
        _ => None,
    }
}

/// Python's `repr(value)`.
fn python_repr(value: &Value) -> String {
    let mut out = String::new();
    repr_into(&mut out, value);
    out
}

fn repr_into(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::None | ValueKind::Undefined => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => dump_number(out, value, false),
        ValueKind::String => repr_str(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(iter) = value.try_iter() {
                for (i, item) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    repr_into(out, &item);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(iter) = value.try_iter() {
                for (i, key) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    repr_into(out, &key);
                    out.push_str(": ");
                    repr_into(out, &value.get_item(&key).unwrap_or_default());
                }
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
fn repr_str(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(json: serde_json::Value) -> Value {
        Value::from(minijinja::value::Serde(&json))
    }

    #[test]
    fn floats_like_python() {
        let cases = [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (1e6, "1000000.0"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (9999999999999998.0, "9999999999999998.0"),
            (-0.0, "-0.0"),
            (-2.5e-7, "-2.5e-07"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e300, "1e+300"),
            (12.0, "12.0"),
            (123.456, "123.456"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f, false), want, "{f:?}");
        }
        assert_eq!(float_repr(f64::NAN, true), "NaN");
        assert_eq!(float_repr(f64::NEG_INFINITY, true), "-Infinity");
        assert_eq!(float_repr(f64::INFINITY, false), "inf");
    }

    #[test]
    fn dumps_like_python() {
        let value =
            v(serde_json::json!({"b": [1, 2.0, null, true], "a": "<&>'\"é\n\u{1}", "c": {}}));
        assert_eq!(
            dumps(&value, &DumpOptions::default()).unwrap(),
            r#"{"b": [1, 2.0, null, true], "a": "<&>'\"é\n\u0001", "c": {}}"#
        );
        let ascii = DumpOptions {
            ensure_ascii: true,
            sort_keys: true,
            ..Default::default()
        };
        assert_eq!(
            dumps(&v(serde_json::json!({"z": "é😀", "a": []})), &ascii).unwrap(),
            r#"{"a": [], "z": "\u00e9\ud83d\ude00"}"#
        );
        let pretty = DumpOptions {
            indent: Some("  ".into()),
            item_separator: ",".into(),
            ..Default::default()
        };
        assert_eq!(
            dumps(
                &v(serde_json::json!({"a": [1, {"b": 2}], "e": []})),
                &pretty
            )
            .unwrap(),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"e\": []\n}"
        );
    }

    #[test]
    fn python_str_of_values() {
        assert_eq!(python_str(&Value::from(())).as_deref(), Some("None"));
        assert_eq!(python_str(&Value::from(true)).as_deref(), Some("True"));
        assert_eq!(python_str(&Value::from(1e-5)).as_deref(), Some("1e-05"));
        assert_eq!(python_str(&Value::from(3)), None);
        assert_eq!(python_str(&Value::from("x")), None);
        assert_eq!(
            python_str(&v(serde_json::json!({"a": [1, "it's", null, false]}))).as_deref(),
            Some(r#"{'a': [1, "it's", None, False]}"#)
        );
    }
}
