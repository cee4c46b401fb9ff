//! `openclaw-host init-default-model`: write out (or build) the built-in default model.

use anyhow::Result;
use openclaw_eval::{evaluate, EvalOptions};
use openclaw_lab::default_model::{
    default_cache_dir, ensure_model, read_recipe_file, write_recipe_file, Provenance, Recipe,
};
use std::path::Path;

/// Makes sure `out` (default: [`default_cache_dir`]) holds the default model, built with
/// `steps` SFT steps when given (another recipe, so it is built, not taken from the binary);
/// `rebuild` builds even when a matching copy exists.
pub fn run(out: Option<&Path>, steps: Option<u64>, rebuild: bool) -> Result<i32> {
    let mut recipe = Recipe::default();
    if let Some(s) = steps {
        if s == 0 {
            anyhow::bail!("--steps must be at least 1");
        }
        recipe.steps = s;
    }
    let dir = out.map(Path::to_path_buf).unwrap_or_else(default_cache_dir);
    let (dir, provenance) = ensure_model(&recipe, &dir, true, rebuild)?;
    let hash = openclaw_lab::default_model::recorded_hash(&dir).unwrap_or_default();
    match provenance {
        Provenance::Cached => println!(
            "{} already holds the default model (recipe {hash})",
            dir.display()
        ),
        Provenance::Shipped => println!(
            "wrote the default model shipped in this binary (recipe {hash}) to {}",
            dir.display()
        ),
        Provenance::Built(r) => {
            println!(
                "built the default model (recipe {hash}) in {}: {:.0} s ({:.0} s SFT), {} steps, \
                 {} parameters, vocabulary {}, loss {:.3} -> {:.3}",
                dir.display(),
                r.seconds,
                r.sft_seconds,
                r.steps,
                r.parameters,
                r.vocab_size,
                r.first_loss,
                r.final_loss
            );
            // A few seconds: record how the new model behaves next to how it was made.
            let report = evaluate(
                &dir,
                &EvalOptions {
                    examples: 0,
                    ..Default::default()
                },
            )?;
            print!("{}", report.table());
            let mut file = read_recipe_file(&dir)?;
            file.eval = Some(report);
            write_recipe_file(&dir, &file)?;
        }
    }
    Ok(0)
}
