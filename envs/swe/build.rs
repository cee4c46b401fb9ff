//! Embeds the built-in instances (`tasks/<id>/`: repo/, issue.md, gold.patch, test.patch,
//! meta.json) in the library, so the plugin carries them wherever its file is copied. The
//! checker's own outputs (broken.patch, broken.json) and check.py stay out.

use std::fmt::Write;
use std::path::{Path, PathBuf};

const KEPT: [&str; 4] = ["issue.md", "gold.patch", "test.patch", "meta.json"];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name == "__pycache__" || name == ".pytest_cache" || name.ends_with(".pyc") {
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
    let mut instances: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("meta.json").is_file())
        .collect();
    instances.sort();
    for inst in &instances {
        println!("cargo:rerun-if-changed={}", inst.display());
        for name in KEPT {
            files.push(inst.join(name));
        }
        walk(&inst.join("repo"), &mut files);
    }
    let mut code = String::from(
        "/// The built-in instances' files: path under `tasks/`, contents.\npub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_str()
            .expect("UTF-8 paths");
        writeln!(
            code,
            "    ({rel:?}, include_bytes!({:?})),",
            f.to_str().unwrap()
        )
        .unwrap();
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("builtin_instances.rs");
    std::fs::write(out, code).unwrap();
}
