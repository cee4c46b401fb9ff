//! The KV cache of a group of sequences. It belongs to the sequences being decoded, never to
//! the model, so one set of weights serves any number of caches.

use burn::prelude::*;

use crate::model::attention::LayerCache;

/// Keys and values of every layer for a batch of sequences decoded together.
#[derive(Clone, Debug)]
pub struct KvCache<B: Backend> {
    layers: Vec<LayerCache<B>>,
    len: usize,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache for `n_layers` layers.
    pub fn new(n_layers: usize) -> Self {
        KvCache {
            layers: (0..n_layers).map(|_| LayerCache::default()).collect(),
            len: 0,
        }
    }

    /// A cache holding `layers` (every row `len` positions long).
    pub fn from_layers(layers: Vec<LayerCache<B>>, len: usize) -> Self {
        KvCache { layers, len }
    }

    /// Every layer's keys and values.
    pub fn layers(&self) -> &[LayerCache<B>] {
        &self.layers
    }

    /// Number of positions cached (the same for every row; padding holes included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cache of layer `i`.
    pub fn layer_mut(&mut self, i: usize) -> &mut LayerCache<B> {
        &mut self.layers[i]
    }

    /// Records that `n` positions were appended.
    pub(crate) fn advance(&mut self, n: usize) {
        self.len += n;
    }

    /// Keeps only the given batch rows, in that order (sequences that finished are dropped).
    pub fn retain_rows(&mut self, rows: &[usize]) {
        let Some(device) = self
            .layers
            .iter()
            .find_map(|l| l.k.as_ref().map(|k| k.device()))
        else {
            return;
        };
        let idx = Tensor::<B, 1, Int>::from_data(
            TensorData::new(
                rows.iter().map(|&r| r as i64).collect::<Vec<_>>(),
                [rows.len()],
            ),
            &device,
        );
        for l in &mut self.layers {
            l.k = l.k.take().map(|k| k.select(0, idx.clone()));
            l.v = l.v.take().map(|v| v.select(0, idx.clone()));
        }
    }
}
