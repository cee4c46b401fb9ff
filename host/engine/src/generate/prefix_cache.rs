//! Keys and values of earlier prompts, kept so a later prompt that starts the same way (the
//! same system prompt and tools in every session of an agent, a session's history at each of
//! its turns) prefills only what is new.
//!
//! An entry is one prompt's keys and values for every layer, computed on one weight version;
//! any later prompt on that version sharing its first `L` tokens can reuse those `L` positions
//! (attention is causal, so position `i` depends on tokens `..=i` alone). Entries of another
//! weight version are never used and are dropped when seen. A prompt prefilled under a LoRA
//! adapter is kept for that adapter's version alone (its keys and values are the adapter's);
//! an adapter's older versions are dropped when a newer one is seen. The store is bounded by a
//! byte budget with least-recently-used eviction.

use burn::prelude::*;

use super::kv_cache::KvCache;
use crate::model::attention::LayerCache;

/// Settings of a [`PrefixCache`].
#[derive(Clone, Copy, Debug)]
pub struct PrefixCacheOptions {
    /// Bytes of keys and values kept at most (0 turns the cache off).
    pub budget_bytes: usize,
    /// Shared prefixes shorter than this are recomputed (batched prefill is cheaper for them).
    pub min_tokens: usize,
}

impl Default for PrefixCacheOptions {
    fn default() -> Self {
        PrefixCacheOptions {
            budget_bytes: 512 << 20,
            min_tokens: 32,
        }
    }
}

/// What the cache has done, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PrefixCacheStats {
    /// Prompts that reused a cached prefix.
    pub hits: u64,
    /// Prompts that found none.
    pub misses: u64,
    /// Prompt tokens whose keys and values were reused instead of computed.
    pub reused_tokens: u64,
    /// Entries dropped for the budget or for an old weight version.
    pub evicted: u64,
    /// Bytes held now.
    pub bytes: usize,
    /// Entries held now.
    pub entries: usize,
}

/// An adapter as the cache keys it: its name and version.
pub type AdapterTag = (std::sync::Arc<str>, u64);

struct Entry<B: Backend> {
    version: u64,
    adapter: Option<AdapterTag>,
    tokens: Vec<u32>,
    /// Per layer: keys and values `[1, kv_heads, tokens, head_dim]`.
    layers: Vec<(Tensor<B, 4>, Tensor<B, 4>)>,
    bytes: usize,
    last_used: u64,
}

/// A reusable prefix: its length and its keys and values for every layer.
pub struct PrefixHit<B: Backend> {
    /// Positions reused.
    pub len: usize,
    /// A one-row cache holding them, ready to be extended.
    pub cache: KvCache<B>,
}

/// The store of prompt prefixes' keys and values (see the module doc).
pub struct PrefixCache<B: Backend> {
    opts: PrefixCacheOptions,
    entries: Vec<Entry<B>>,
    clock: u64,
    stats: PrefixCacheStats,
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<B: Backend> PrefixCache<B> {
    /// An empty store.
    pub fn new(opts: PrefixCacheOptions) -> Self {
        PrefixCache {
            opts,
            entries: Vec::new(),
            clock: 0,
            stats: PrefixCacheStats::default(),
        }
    }

    /// Whether it keeps anything at all.
    pub fn enabled(&self) -> bool {
        self.opts.budget_bytes > 0
    }

    /// What it has done so far.
    pub fn stats(&self) -> PrefixCacheStats {
        PrefixCacheStats {
            bytes: self.entries.iter().map(|e| e.bytes).sum(),
            entries: self.entries.len(),
            ..self.stats
        }
    }

    fn forget_other_versions(&mut self, version: u64, adapter: Option<&AdapterTag>) {
        let before = self.entries.len();
        self.entries.retain(|e| {
            let older_adapter = match (&e.adapter, adapter) {
                (Some((name, v)), Some((now, current))) => name == now && v != current,
                _ => false,
            };
            e.version == version && !older_adapter
        });
        self.stats.evicted += (before - self.entries.len()) as u64;
    }

    /// The longest cached prefix of `prompt` computed on `version`, leaving at least one token
    /// of the prompt to compute (its logits start generation).
    pub fn lookup(&mut self, version: u64, prompt: &[u32]) -> Option<PrefixHit<B>> {
        self.lookup_for(version, None, prompt)
    }

    /// [`PrefixCache::lookup`] for a prompt served with `adapter` (none: the base alone).
    pub fn lookup_for(
        &mut self,
        version: u64,
        adapter: Option<AdapterTag>,
        prompt: &[u32],
    ) -> Option<PrefixHit<B>> {
        if !self.enabled() {
            return None;
        }
        self.forget_other_versions(version, adapter.as_ref());
        let limit = prompt.len().saturating_sub(1);
        let best = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.adapter == adapter)
            .map(|(i, e)| (i, common_prefix(&e.tokens, prompt).min(limit)))
            .max_by_key(|&(_, n)| n)
            .filter(|&(_, n)| n >= self.opts.min_tokens.max(1));
        let Some((i, len)) = best else {
            self.stats.misses += 1;
            return None;
        };
        self.clock += 1;
        let e = &mut self.entries[i];
        e.last_used = self.clock;
        self.stats.hits += 1;
        self.stats.reused_tokens += len as u64;
        let layers = e
            .layers
            .iter()
            .map(|(k, v)| {
                let [_, kvh, _, hd] = k.dims();
                let dv = v.dims()[3];
                LayerCache::from_tensors(
                    k.clone().slice([0..1, 0..kvh, 0..len, 0..hd]),
                    v.clone().slice([0..1, 0..kvh, 0..len, 0..dv]),
                )
            })
            .collect();
        Some(PrefixHit {
            len,
            cache: KvCache::from_layers(layers, len),
        })
    }

    /// Keeps row `row` of `cache` (its first `prompt.len()` positions) as the prefix of
    /// `prompt` computed on `version`.
    pub fn insert(&mut self, version: u64, prompt: &[u32], cache: &KvCache<B>, row: usize) {
        self.insert_for(version, None, prompt, cache, row)
    }

    /// [`PrefixCache::insert`] of a prompt prefilled with `adapter`.
    pub fn insert_for(
        &mut self,
        version: u64,
        adapter: Option<AdapterTag>,
        prompt: &[u32],
        cache: &KvCache<B>,
        row: usize,
    ) {
        if !self.enabled() || prompt.is_empty() {
            return;
        }
        self.forget_other_versions(version, adapter.as_ref());
        // Nothing to add when a kept prompt already starts with this one.
        if self.entries.iter().any(|e| {
            e.adapter == adapter && e.tokens.len() >= prompt.len() && e.tokens.starts_with(prompt)
        }) {
            return;
        }
        let len = prompt.len();
        let mut bytes = 0;
        let mut layers = Vec::with_capacity(cache.layers().len());
        for l in cache.layers() {
            let Some((k, v)) = l.row_tensors(row, len) else {
                return;
            };
            let [_, kvh, _, hd] = k.dims();
            bytes += kvh * len * (hd + v.dims()[3]) * std::mem::size_of::<f32>();
            layers.push((k, v));
        }
        if bytes > self.opts.budget_bytes {
            return;
        }
        // A kept prompt this one extends is covered by it now.
        self.entries.retain(|e| {
            !(e.adapter == adapter && e.tokens.len() <= len && prompt.starts_with(&e.tokens))
        });
        self.clock += 1;
        self.entries.push(Entry {
            version,
            adapter,
            tokens: prompt.to_vec(),
            layers,
            bytes,
            last_used: self.clock,
        });
        while self.entries.iter().map(|e| e.bytes).sum::<usize>() > self.opts.budget_bytes {
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i)
                .expect("over budget means non-empty");
            self.entries.remove(oldest);
            self.stats.evicted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    type B = CpuBackend;

    /// A one-row cache of `len` positions whose keys hold their position.
    fn cache(len: usize, layers: usize) -> KvCache<B> {
        let dev = Default::default();
        let data: Vec<f32> = (0..len).map(|p| p as f32).collect();
        let t = Tensor::<B, 1>::from_floats(data.as_slice(), &dev).reshape([1, 1, len, 1]);
        KvCache::from_layers(
            (0..layers)
                .map(|_| LayerCache::from_tensors(t.clone(), t.clone()))
                .collect(),
            len,
        )
    }

    #[test]
    fn the_longest_shared_prefix_of_the_same_version_is_reused() {
        let mut pc = PrefixCache::<B>::new(PrefixCacheOptions {
            budget_bytes: 1 << 20,
            min_tokens: 2,
        });
        let a: Vec<u32> = (0..10).collect();
        pc.insert(1, &a, &cache(10, 2), 0);
        let mut b = a[..6].to_vec();
        b.extend([99, 98]);
        let hit = pc.lookup(1, &b).expect("six tokens shared");
        assert_eq!(hit.len, 6);
        assert_eq!(hit.cache.len(), 6);
        let (k, _) = hit.cache.layers()[1].tensors().unwrap();
        assert_eq!(k.dims(), [1, 1, 6, 1]);
        // The whole prompt is never taken: its last token must be computed for its logits.
        assert_eq!(pc.lookup(1, &a).unwrap().len, 9);
        // Another weight version reuses nothing, and drops what it finds.
        assert!(pc.lookup(2, &b).is_none());
        assert_eq!(pc.stats().entries, 0);
        assert_eq!(pc.stats().hits, 2);
        assert_eq!(pc.stats().reused_tokens, 15);
    }

    #[test]
    fn a_prefix_is_reused_only_under_its_own_adapter_and_version() {
        let mut pc = PrefixCache::<B>::new(PrefixCacheOptions {
            budget_bytes: 1 << 20,
            min_tokens: 2,
        });
        let a: Vec<u32> = (0..10).collect();
        let tag = |v: u64| Some((std::sync::Arc::<str>::from("alice"), v));
        pc.insert_for(1, tag(3), &a, &cache(10, 2), 0);
        assert!(pc.lookup(1, &a).is_none(), "the base does not take alice's");
        assert!(pc.lookup_for(1, Some(("bob".into(), 3)), &a).is_none());
        assert_eq!(pc.lookup_for(1, tag(3), &a).unwrap().len, 9);
        // The base's own entry sits beside it.
        pc.insert(1, &a, &cache(10, 2), 0);
        assert_eq!(pc.stats().entries, 2);
        // Alice's next version drops her old entry and keeps the base's.
        assert!(pc.lookup_for(1, tag(4), &a).is_none());
        assert_eq!(pc.stats().entries, 1);
        assert_eq!(pc.lookup(1, &a).unwrap().len, 9);
    }

    #[test]
    fn the_budget_evicts_the_least_recently_used() {
        // Each entry: 2 layers x (k + v) x 8 positions x 4 bytes = 128 bytes.
        let mut pc = PrefixCache::<B>::new(PrefixCacheOptions {
            budget_bytes: 300,
            min_tokens: 2,
        });
        let p = |first: u32| -> Vec<u32> { (first..first + 8).collect() };
        pc.insert(0, &p(0), &cache(8, 2), 0);
        pc.insert(0, &p(100), &cache(8, 2), 0);
        assert!(pc.lookup(0, &p(0)).is_some(), "touch the first");
        pc.insert(0, &p(200), &cache(8, 2), 0);
        let s = pc.stats();
        assert_eq!((s.entries, s.bytes, s.evicted), (2, 256, 1));
        assert!(
            pc.lookup(0, &p(100)).is_none(),
            "the least recently used went"
        );
        assert!(pc.lookup(0, &p(0)).is_some());
        // A prompt that extends a kept one replaces it (then the budget takes the older
        // other one); one that a kept prompt extends adds nothing.
        let longer: Vec<u32> = (0..12).collect();
        pc.insert(0, &longer, &cache(12, 2), 0);
        let s = pc.stats();
        assert_eq!((s.entries, s.bytes), (1, 192));
        assert!(pc.lookup(0, &p(200)).is_none());
        pc.insert(0, &longer[..5], &cache(5, 2), 0);
        assert_eq!(pc.stats().entries, 1);
        assert_eq!(pc.lookup(0, &longer).unwrap().len, 11);
    }
}
