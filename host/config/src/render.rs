//! The resolved configuration as TOML, each value annotated with where it came from.

use super::resolve::{PluginConfig, Resolved};
use toml::{Table, Value};

/// Renders the configuration. Secrets print as `"***"` when set; everything else is valid
/// TOML that `--config` reads back.
pub fn render(r: &Resolved) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    for (spec, value, source) in &r.values {
        let shown = if spec.secret && value.as_str().is_some_and(|s| !s.is_empty()) {
            "\"***\"".to_string()
        } else {
            value.to_string()
        };
        lines.push((format!("{} = {shown}", spec.key), source.to_string()));
    }
    let mut out = String::from(
        "# openclaw-host run configuration, resolved (defaults < plugin < file < env < flags)\n",
    );
    out.push_str(&align(&lines));
    for p in &r.plugins {
        out.push('\n');
        let header = if p.is_main {
            "method".to_string()
        } else {
            format!("plugins.{}", quote_key(&p.name))
        };
        out.push_str(&format!(
            "[{header}] # configuration of plugin {}\n",
            p.name
        ));
        render_table(p, &p.table, &header, "", &mut out);
    }
    out
}

fn render_table(p: &PluginConfig, t: &Table, header: &str, prefix: &str, out: &mut String) {
    let mut lines = Vec::new();
    for (k, v) in t {
        if matches!(v, Value::Table(_)) {
            continue;
        }
        let path = join(prefix, k);
        let src = p
            .sources
            .get(&path)
            .map(|s| s.to_string())
            .unwrap_or_default();
        lines.push((format!("{} = {v}", quote_key(k)), src));
    }
    out.push_str(&align(&lines));
    for (k, v) in t {
        if let Value::Table(inner) = v {
            let h = format!("{header}.{}", quote_key(k));
            out.push_str(&format!("\n[{h}]\n"));
            render_table(p, inner, &h, &join(prefix, k), out);
        }
    }
}

fn join(prefix: &str, k: &str) -> String {
    if prefix.is_empty() {
        k.to_string()
    } else {
        format!("{prefix}.{k}")
    }
}

fn quote_key(k: &str) -> String {
    if k.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !k.is_empty()
    {
        k.to_string()
    } else {
        format!("{k:?}")
    }
}

fn align(lines: &[(String, String)]) -> String {
    let width = lines
        .iter()
        .map(|(l, _)| l.len())
        .max()
        .unwrap_or(0)
        .min(60);
    lines
        .iter()
        .map(|(l, src)| {
            if src.is_empty() {
                format!("{l}\n")
            } else {
                format!("{l:<width$}  # {src}\n")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::resolve::{resolve, ConfigInputs, PluginConfigs};
    use super::*;

    #[test]
    fn the_printout_reads_back_to_the_same_values() {
        let plugins = PluginConfigs {
            loaded: true,
            main: Some(("opd".into(), "mode = \"token\"\n[topk]\nk = 50\n".into())),
            others: vec![("my-method".into(), "kl_coef = 0.02\n".into())],
        };
        let mut inputs = ConfigInputs::from_env();
        inputs.env = Box::new(|k| (k == "OPENCLAW_API_KEY").then(|| "sk-secret".to_string()));
        let r = resolve(&inputs, &plugins).unwrap();
        let text = render(&r);
        assert!(text.contains("api_key = \"***\""), "{text}");
        assert!(!text.contains("sk-secret"));
        assert!(text.contains("# env OPENCLAW_API_KEY"));
        assert!(text.contains("[method] # configuration of plugin opd"));
        assert!(text.contains("[method.topk]"));
        assert!(text.contains("[plugins.my-method]"));
        let back: Table = toml::from_str(&text).expect("valid TOML");
        assert_eq!(back["lr"].as_float(), Some(1e-5));
        assert_eq!(back["method"]["topk"]["k"].as_integer(), Some(50));
        assert_eq!(
            back["plugins"]["my-method"]["kl_coef"].as_float(),
            Some(0.02)
        );
    }
}
