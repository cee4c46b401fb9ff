//! Embeds the built-in task set (the task folders under `tasks/`) in the library, so the plugin
//! carries its tasks wherever its file is copied. Files directly in `tasks/` (the checker
//! script, notes) and hidden or `__pycache__` folders are left out.

use std::fmt::Write;
use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    if root.is_dir() {
        walk(&root, &mut files);
    }
    let mut code = String::from(
        "/// The built-in tasks' files: path under `tasks/`, contents.\npub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_str()
            .expect("UTF-8 task paths");
        if !rel.contains('/') {
            // Not in a task folder.
            continue;
        }
        writeln!(
            code,
            "    ({rel:?}, include_bytes!({:?})),",
            f.to_str().unwrap()
        )
        .unwrap();
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("builtin_tasks.rs");
    std::fs::write(out, code).unwrap();
}
