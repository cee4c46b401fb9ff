//! Whether a model's weights are all finite: a checkpoint with NaN or infinite weights serves
//! garbage and every training step on it fails, so loading and publishing refuse it by name.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;

use super::Model;

/// Collects the path of the first float parameter whose values are not all finite.
struct FirstNonFinite {
    path: Vec<String>,
    found: Option<String>,
}

impl<B: Backend> ModuleVisitor<B> for FirstNonFinite {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if self.found.is_some() {
            return;
        }
        // A NaN or an infinity anywhere makes the sum non-finite (finite weights of any model
        // size are far from overflowing it), and one reduction per tensor costs one pass.
        let sum: f32 = param.val().sum().into_scalar().elem();
        if !sum.is_finite() {
            let path: Vec<&str> = self
                .path
                .iter()
                .map(String::as_str)
                .filter(|p| !p.is_empty())
                .collect();
            self.found = Some(path.join("."));
        }
    }
}

impl<B: Backend> Model<B> {
    /// The module path of the first weight holding a NaN or an infinity, if any (f32 weights;
    /// a GGUF file's quantised blocks are not read here).
    pub fn non_finite_weight(&self) -> Option<String> {
        let mut v = FirstNonFinite {
            path: Vec::new(),
            found: None,
        };
        self.visit(&mut v);
        v.found
    }
}
