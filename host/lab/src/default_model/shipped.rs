//! The default model built from the current recipe, compiled into the binary
//! (`host/lab/assets/default-model`, about 4 MB), so that users and CI do not build it. Refresh it
//! after a recipe change with `openclaw-host init-default-model --out host/lab/assets/default-model
//! --rebuild` (a test fails until then).

use anyhow::{Context, Result};
use std::path::Path;

macro_rules! asset {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!("../../assets/default-model/", $name)).as_slice(),
        )
    };
}

/// The shipped files, by name.
const FILES: &[(&str, &[u8])] = &[
    asset!("config.json"),
    asset!("model.safetensors"),
    asset!("tokenizer.json"),
    asset!("tokenizer_config.json"),
    asset!("recipe.json"),
];

/// The recipe hash of the shipped copy (`None` when there is none).
pub(super) fn hash() -> Option<String> {
    let (_, bytes) = FILES.iter().find(|(n, _)| *n == super::RECIPE_FILE)?;
    serde_json::from_slice::<super::RecipeFile>(bytes)
        .ok()
        .map(|r| r.hash)
}

/// Writes the shipped files into `dir`.
pub(super) fn write_to(dir: &Path) -> Result<()> {
    for (name, bytes) in FILES {
        let p = dir.join(name);
        std::fs::write(&p, bytes).with_context(|| format!("cannot write {}", p.display()))?;
    }
    Ok(())
}
