//! Gradient clipping by the global norm over every parameter, as torch's `clip_grad_norm_`
//! does (burn's own norm clipping works per tensor).

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

/// Sums the squares of every gradient of `module`'s parameters as one device scalar, so the
/// norm costs one host read instead of one per tensor.
struct SquareSum<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    total: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquareSum<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let s = g.square().sum();
            self.total = Some(match self.total.take() {
                Some(t) => t + s,
                None => s,
            });
        }
    }
}

/// Multiplies every gradient of `module`'s parameters by a constant.
struct Scale<'a> {
    grads: &'a mut GradientsParams,
    factor: f64,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            self.grads.register(param.id, g.mul_scalar(self.factor));
        }
    }
}

/// The L2 norm of all of `module`'s gradients in `grads` taken together.
pub fn global_grad_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &GradientsParams,
) -> f64 {
    let mut v = SquareSum::<B> { grads, total: None };
    module.visit(&mut v);
    match v.total {
        Some(t) => (t.into_scalar().elem::<f64>()).sqrt(),
        None => 0.0,
    }
}

/// Scales every gradient of `module` in `grads` by `factor`.
pub fn scale_grads<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    factor: f64,
) {
    let mut v = Scale { grads, factor };
    module.visit(&mut v);
}

/// Clips the gradients so that their global norm is at most `max_norm` (0 turns clipping off)
/// and returns the norm before clipping. Same rule as torch: when the norm exceeds the limit,
/// every gradient is multiplied by `max_norm / (norm + 1e-6)`.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) -> f64 {
    let norm = global_grad_norm::<B, M>(module, grads);
    if max_norm > 0.0 && norm.is_finite() {
        let coef = max_norm / (norm + 1e-6);
        if coef < 1.0 {
            scale_grads::<B, M>(module, grads, coef);
        }
    }
    norm
}
