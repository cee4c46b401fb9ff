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

    /// Keeps only the given batch rows, in that order (sequences that finished are dropped);
    /// none leaves an empty cache.
    pub fn retain_rows(&mut self, rows: &[usize]) {
        for l in &mut self.layers {
            l.retain_rows(rows);
        }
        if rows.is_empty() {
            self.len = 0;
        }
    }

    /// Expects every layer to reach `positions` (see [`LayerCache::reserve`]).
    pub fn reserve(&mut self, positions: usize) {
        for l in &mut self.layers {
            l.reserve(positions);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    #[test]
    fn retaining_rows_keeps_them_in_order_and_retaining_none_empties_every_layer() {
        let dev = Default::default();
        // Two rows, one kv head, three positions of width 2; row r holds the value r.
        let t = Tensor::<CpuBackend, 4>::from_data(
            TensorData::new(
                vec![0f32, 0., 0., 0., 0., 0., 1., 1., 1., 1., 1., 1.],
                [2, 1, 3, 2],
            ),
            &dev,
        );
        let layers = (0..2)
            .map(|_| LayerCache::from_tensors(t.clone(), t.clone()))
            .collect();
        let mut cache = KvCache::<CpuBackend>::from_layers(layers, 3);
        cache.retain_rows(&[1, 0]);
        let (k, _) = cache.layers()[1].tensors().expect("still cached");
        let k = k.into_data().to_vec::<f32>().unwrap();
        assert_eq!(k[..6], [1.0; 6]);
        assert_eq!(k[6..], [0.0; 6]);
        // The last step of every generation retains none: nothing is left, and no tensor op
        // runs on zero rows (which burn's CUDA backend cannot launch).
        cache.retain_rows(&[]);
        assert!(cache.layers().iter().all(|l| l.tensors().is_none()));
        assert!(cache.is_empty());
    }
}
