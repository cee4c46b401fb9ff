//! Sandboxes on images: what the environments do with their tasks' images, once.

use std::collections::HashMap;

use openclaw_sandbox::{Sandbox, SandboxConfig, SystemRoot};

use crate::{Built, ImageCache, ImageSpec};

/// A sandbox on a built image, or why there is none.
pub type OnImage = Result<(Sandbox, Built), String>;

/// For each `(name, spec)`, the sandbox `base` on that image and the built image, or why there
/// is none. Each distinct image is built once (a cached one is reused); `first_build` hears of
/// each image about to be built, with the first name that needs it.
pub fn sandboxes(
    cache: &ImageCache,
    items: &[(String, ImageSpec)],
    base: &SandboxConfig,
    first_build: impl Fn(&str, &ImageSpec),
) -> Vec<(String, OnImage)> {
    let mut by_key: HashMap<String, OnImage> = HashMap::new();
    let mut out = Vec::with_capacity(items.len());
    for (name, spec) in items {
        let key = match cache.key(spec) {
            Ok(k) => k,
            Err(e) => {
                out.push((name.clone(), Err(e.to_string())));
                continue;
            }
        };
        let made = by_key.entry(key).or_insert_with(|| {
            if cache.cached(spec).ok().flatten().is_none() {
                first_build(name, spec);
            }
            let built = cache.build(spec).map_err(|e| e.to_string())?;
            let sandbox = Sandbox::new(SandboxConfig {
                system: SystemRoot::Image(built.root.clone()),
                env: built.env.clone(),
                ..base.clone()
            })
            .map_err(|e| e.to_string())?;
            Ok((sandbox, built))
        });
        out.push((name.clone(), made.clone()));
    }
    out
}
