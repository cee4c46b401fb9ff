//! Many LoRA adapters served over one base model, in one batch (S-LoRA and Punica's gathers).
//!
//! The base stays as it is (unmerged, possibly in quantised blocks) and each request may name
//! an adapter. A forward pass over rows of several adapters runs on a *view* of the base
//! ([`rows_view`]): the same weights, with each projection told which adapter each row takes
//! ([`RowLora`]). Each projection then adds, for every adapter present, `scale · x_s A_s B_s`
//! to the rows `x_s` that take it; rows with no adapter get the base alone. Every product goes
//! through the same matmul the projection's own adapter would (the decode kernel sums each row
//! in an order that does not depend on the other rows), so a request computes the same thing in
//! a mixed batch as alone with its adapter.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use burn::prelude::*;
use burn::tensor::IndexingUpdateOp;

use crate::lora::{self, LoraConfig};
use crate::model::Model;
use crate::rng::Rng;

/// One projection's adapter: `A [d_in, rank]`, `B [rank, d_out]` and `scale`.
#[derive(Clone, Debug)]
pub struct LoraPair<B: Backend> {
    /// Down projection.
    pub a: Tensor<B, 2>,
    /// Up projection.
    pub b: Tensor<B, 2>,
    /// `lora_alpha / rank`.
    pub scale: f64,
}

/// An adapter for every projection of a model: per layer, its seven projections (q, k, v, o,
/// gate, up, down), each with an adapter or none.
#[derive(Clone, Debug)]
pub struct AdapterWeights<B: Backend> {
    layers: Vec<[Option<LoraPair<B>>; 7]>,
}

impl<B: Backend> AdapterWeights<B> {
    /// The adapters `model` carries (a LoRA run's policy, a loaded PEFT adapter).
    pub fn of(model: &Model<B>) -> Result<Self> {
        if !lora::has_adapters(model) {
            bail!("the model carries no LoRA adapter");
        }
        let layers = model
            .model
            .layers
            .iter()
            .map(|l| {
                l.projections().map(|p| {
                    p.lora.as_ref().map(|a| LoraPair {
                        a: a.a.val(),
                        b: a.b.val(),
                        scale: a.scale,
                    })
                })
            })
            .collect();
        Ok(AdapterWeights { layers })
    }

    /// The PEFT adapter saved in `dir` (`adapter_config.json`, `adapter_model.safetensors`),
    /// read over `base`.
    pub fn read(base: &Model<B>, dir: &std::path::Path) -> Result<Self> {
        let (with, _) = lora::load_adapters(lora::stripped(base), dir)?;
        Self::of(&with)
    }

    /// A random adapter over `model` as `cfg` shapes it, both factors drawn from `seed` (B
    /// uniform in `±b_bound`): benchmarks and tests of serving, where a fresh adapter's zero B
    /// would hide its cost's effect on the output.
    pub fn random(model: &Model<B>, cfg: &LoraConfig, seed: u64, b_bound: f32) -> Result<Self> {
        let attached = lora::attach(lora::stripped(model), cfg, seed)?;
        let mut w = Self::of(&attached)?;
        let mut rng = Rng::new(seed ^ 0x5eed_b0b5);
        for pair in w.layers.iter_mut().flatten().flatten() {
            let [r, d_out] = pair.b.dims();
            let b: Vec<f32> = (0..r * d_out)
                .map(|_| (rng.uniform() as f32 * 2.0 - 1.0) * b_bound)
                .collect();
            pair.b = Tensor::from_data(TensorData::new(b, [r, d_out]), &pair.b.device());
        }
        Ok(w)
    }

    /// A copy of `base` (which must carry no adapter) with these factors attached as its own
    /// adapters: to save them in PEFT's form ([`lora::save_adapters`]) or merge them.
    pub fn attached_to(&self, base: &Model<B>) -> Result<Model<B>> {
        if lora::has_adapters(base) {
            bail!("the model already carries LoRA adapters");
        }
        if self.layers.len() != base.model.layers.len() {
            bail!(
                "the adapter has {} layers, the model {}",
                self.layers.len(),
                base.model.layers.len()
            );
        }
        let mut out = base.clone();
        for (layer, pairs) in out.model.layers.iter_mut().zip(&self.layers) {
            for (p, pair) in lora::projections_mut(layer).into_iter().zip(pairs) {
                p.lora = pair
                    .as_ref()
                    .map(|q| crate::model::projection::LoraAdapter {
                        a: burn::module::Param::from_tensor(q.a.clone()),
                        b: burn::module::Param::from_tensor(q.b.clone()),
                        scale: q.scale,
                        dropout: 0.0,
                    });
            }
        }
        Ok(out)
    }

    /// Bytes its factors take in f32.
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .flatten()
            .flatten()
            .map(|p| {
                (p.a.dims().iter().product::<usize>() + p.b.dims().iter().product::<usize>()) * 4
            })
            .sum()
    }
}

/// An adapter as requests are served with it: its name and version with its weights.
#[derive(Debug)]
pub struct ServedAdapter<B: Backend> {
    /// Whose it is (a user's id).
    pub name: Arc<str>,
    /// Its weight version: one more than the last for each new publication, and at least the
    /// training step its directory's `trainer_state.json` names (a checkpoint of a trainer),
    /// so versions go on across restarts; loading the same file again keeps its version.
    pub version: u64,
    /// The factors.
    pub weights: AdapterWeights<B>,
}

/// The adapters a server holds, by name: what requests naming one are served with. Publishing
/// an adapter again gives it the next version; a batch keeps the version it started with.
///
/// A store over a directory ([`AdapterStore::over_dir`], one adapter per user) loads
/// `dir/<name>/` (PEFT files) when a request first names it, loads it again when its weights
/// file changes (a trainer wrote a newer one: the next version), holds at most `cap` in memory
/// (the least recently used goes first; batches that hold one keep it), and serves a name with
/// no directory on the base alone (a user's fresh adapter is the base).
#[derive(Debug)]
pub struct AdapterStore<B: Backend> {
    adapters: std::sync::RwLock<std::collections::BTreeMap<Arc<str>, Held<B>>>,
    /// Each name's last version and the weights file it was loaded from, kept after its
    /// adapter is evicted: a version is never given to two weights of one name (the prefix
    /// cache keys prompts by it).
    versions: std::sync::Mutex<std::collections::HashMap<Arc<str>, LastVersion>>,
    dir: Option<DirSource<B>>,
    clock: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Held<B: Backend> {
    adapter: Arc<ServedAdapter<B>>,
    /// Which weights file it was loaded from (directory stores).
    loaded: Option<Loaded>,
    last_used: std::sync::atomic::AtomicU64,
}

/// A name's last version and the file it was loaded from (none: published in memory).
type LastVersion = (u64, Option<Loaded>);

/// Which weights file an adapter was loaded from: the file its directory resolved to and that
/// file's modification time (a trainer's directory is a link that moves to each new
/// checkpoint, so the path tells versions apart even within one clock tick).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Loaded {
    file: std::path::PathBuf,
    modified: std::time::SystemTime,
}

impl Loaded {
    /// The weights file of adapter directory `dir` as it stands now; `None` when there is none.
    fn of(dir: &std::path::Path) -> Option<Loaded> {
        let file = std::fs::canonicalize(dir.join(lora::ADAPTER_FILE)).ok()?;
        let modified = std::fs::metadata(&file).and_then(|m| m.modified()).ok()?;
        Some(Loaded { file, modified })
    }
}

/// The training step a trainer's checkpoint in `dir` names (`trainer_state.json`'s
/// `state.step`); `None` for a plain PEFT directory.
fn trained_step(dir: &std::path::Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join("trainer_state.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["state"]["step"].as_u64()
}

#[derive(Debug)]
struct DirSource<B: Backend> {
    dir: std::path::PathBuf,
    cap: usize,
    base: Model<B>,
}

impl<B: Backend> Default for AdapterStore<B> {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether `name` can name an adapter (and a directory under the store's): 1 to 64 letters,
/// digits, `.`, `_` or `-`, starting with a letter or digit.
pub fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

impl<B: Backend> AdapterStore<B> {
    /// An empty store of published adapters.
    pub fn new() -> Self {
        AdapterStore {
            adapters: Default::default(),
            versions: Default::default(),
            dir: None,
            clock: Default::default(),
        }
    }

    /// A store that loads adapter `name` from `dir/name` over `base` on demand, holding at most
    /// `cap` (at least 1).
    pub fn over_dir(dir: &std::path::Path, cap: usize, base: &Model<B>) -> Result<Self> {
        if !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
        if lora::has_adapters(base) {
            bail!("adapters are served over a base without adapters of its own");
        }
        Ok(AdapterStore {
            dir: Some(DirSource {
                dir: dir.to_path_buf(),
                cap: cap.max(1),
                base: base.clone(),
            }),
            ..Self::new()
        })
    }

    /// Whether a name with no adapter is served on the base (a directory store) rather than
    /// refused.
    pub fn base_when_missing(&self) -> bool {
        self.dir.is_some()
    }

    /// Makes `weights` adapter `name`'s current version; returns that version (1 for a new
    /// name, one more than the last for a name seen before, even one evicted since).
    pub fn publish(&self, name: &str, weights: AdapterWeights<B>) -> u64 {
        self.put(name, weights, None, None).version
    }

    /// Holds `weights` as `name`'s next version (evicting beyond the cap) and returns it: the
    /// version it had when the same file was loaded before, else one more than the last and at
    /// least `step`.
    fn put(
        &self,
        name: &str,
        weights: AdapterWeights<B>,
        loaded: Option<Loaded>,
        step: Option<u64>,
    ) -> Arc<ServedAdapter<B>> {
        let mut map = self.adapters.write().unwrap_or_else(|e| e.into_inner());
        let name: Arc<str> = name.into();
        let version = {
            let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
            let (last, from) = versions.entry(name.clone()).or_insert((0, None));
            if loaded.is_none() || *from != loaded {
                *last = (*last + 1).max(step.unwrap_or(0));
                from.clone_from(&loaded);
            }
            *last
        };
        let adapter = Arc::new(ServedAdapter {
            name: name.clone(),
            version,
            weights,
        });
        let now = self.tick();
        map.insert(
            name,
            Held {
                adapter: adapter.clone(),
                loaded,
                last_used: now.into(),
            },
        );
        if let Some(src) = &self.dir {
            while map.len() > src.cap {
                let oldest = map
                    .iter()
                    .min_by_key(|(_, h)| h.last_used.load(std::sync::atomic::Ordering::Relaxed))
                    .map(|(k, _)| k.clone())
                    .expect("over the cap means non-empty");
                map.remove(&oldest);
            }
        }
        adapter
    }

    fn tick(&self) -> u64 {
        self.clock
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1
    }

    /// Adapter `name`'s current version: held, or (a directory store) loaded now from its
    /// directory, again when its weights file changed. `Ok(None)`: there is none.
    pub fn get(&self, name: &str) -> Result<Option<Arc<ServedAdapter<B>>>> {
        let Some(src) = &self.dir else {
            let map = self.adapters.read().unwrap_or_else(|e| e.into_inner());
            return Ok(map.get(name).map(|h| h.adapter.clone()));
        };
        if !valid_name(name) {
            bail!("`{name}` cannot name an adapter");
        }
        let dir = src.dir.join(name);
        let stamp = Loaded::of(&dir);
        {
            let map = self.adapters.read().unwrap_or_else(|e| e.into_inner());
            if let Some(h) = map.get(name) {
                if stamp.is_none() || h.loaded == stamp {
                    h.last_used
                        .store(self.tick(), std::sync::atomic::Ordering::Relaxed);
                    return Ok(Some(h.adapter.clone()));
                }
            }
        }
        if stamp.is_none() {
            return Ok(None);
        }
        // Read through the file the stamp names: the link may move on meanwhile, and then the
        // next request loads the newer one.
        let from = stamp
            .as_ref()
            .and_then(|s| s.file.parent())
            .map_or(dir.clone(), |d| d.to_path_buf());
        let weights = AdapterWeights::read(&src.base, &from)
            .with_context(|| format!("adapter `{name}` in {}", dir.display()))?;
        let step = trained_step(&from);
        Ok(Some(self.put(name, weights, stamp, step)))
    }

    /// Adapters held in memory now.
    pub fn held(&self) -> usize {
        self.adapters
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// The names held, in order.
    pub fn names(&self) -> Vec<Arc<str>> {
        let map = self.adapters.read().unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    }

    /// Loads the PEFT adapter saved in `dir` (`adapter_config.json` and
    /// `adapter_model.safetensors`) over `base` and publishes it as `name`.
    pub fn load(&self, name: &str, base: &Model<B>, dir: &std::path::Path) -> Result<u64> {
        Ok(self.publish(name, AdapterWeights::read(base, dir)?))
    }
}

/// Which adapter each row of a projection's input takes: the adapters present, and for each
/// sequence its adapter's index among them (rows are `[sequences × positions]`, flattened).
#[derive(Clone, Debug)]
pub struct RowLora<B: Backend> {
    /// This projection's factors in each adapter present (`None`: the adapter leaves it alone).
    pairs: Vec<Option<LoraPair<B>>>,
    /// For each adapter present, the sequences that take it (in order), shared by every
    /// projection of the view: worked out once per view, not per projection.
    takers: Arc<[Vec<usize>]>,
    /// The view's sequences.
    sequences: usize,
}

impl<B: Backend> RowLora<B> {
    /// `x [rows, d_in]`'s adapter terms added to `y [rows, d_out]`: each adapter's rows go
    /// through its two products together, and are put back in their places.
    pub fn add_to(&self, y: Tensor<B, 2>, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let [rows, _] = x.dims();
        let seqs = self.sequences;
        if seqs == 0 || rows % seqs != 0 {
            // Not a layout the view was made for: a bug, never a silent wrong answer.
            panic!("a view for {seqs} sequences got {rows} rows");
        }
        let per = rows / seqs;
        // Each adapter present with the rows that take it (none with no rows: CUDA refuses
        // operations on empty sets).
        let groups: Vec<(&LoraPair<B>, Vec<usize>)> = self
            .pairs
            .iter()
            .zip(self.takers.iter())
            .filter_map(|(pair, takers)| {
                let rows: Vec<usize> = takers
                    .iter()
                    .flat_map(|&q| q * per..(q + 1) * per)
                    .collect();
                Some((pair.as_ref()?, rows)).filter(|(_, r)| !r.is_empty())
            })
            .collect();
        if let Some(out) = crate::kernels::lora_rows::try_add_rows(&y, &x, &groups) {
            return out;
        }
        add_groups(y, x, groups)
    }
}

/// `y` plus each adapter's term on its rows, in burn's operations (CUDA, prefill).
fn add_groups<B: Backend>(
    y: Tensor<B, 2>,
    x: Tensor<B, 2>,
    groups: Vec<(&LoraPair<B>, Vec<usize>)>,
) -> Tensor<B, 2> {
    let rows = x.dims()[0];
    let device = x.device();
    let mut out = y;
    for (pair, idx) in groups {
        out = if idx.len() == rows {
            out + lora_delta(x.clone(), pair)
        } else {
            let n = idx.len();
            let idx: Vec<i64> = idx.into_iter().map(|r| r as i64).collect();
            let idx = Tensor::<B, 1, Int>::from_data(TensorData::new(idx, [n]), &device);
            let d = lora_delta(x.clone().select(0, idx.clone()), pair);
            out.select_assign(0, idx, d, IndexingUpdateOp::Add)
        };
    }
    out
}

/// `scale · x A B`, as a projection's own adapter computes it.
fn lora_delta<B: Backend>(x: Tensor<B, 2>, p: &LoraPair<B>) -> Tensor<B, 2> {
    let low = crate::model::projection::matmul(x, p.a.clone()).mul_scalar(p.scale);
    crate::model::projection::matmul(low, p.b.clone())
}

/// A view of `model` whose forward passes serve sequence `i` with adapter
/// `adapters[sequences[i]]` (none where it is `None`). `model` must carry no adapter of its own.
pub fn rows_view<B: Backend>(
    model: &Model<B>,
    adapters: &[Arc<ServedAdapter<B>>],
    sequences: &[Option<usize>],
) -> Result<Model<B>> {
    if lora::has_adapters(model) {
        bail!("adapters are served over a base without adapters of its own");
    }
    for a in adapters {
        if a.weights.layers.len() != model.model.layers.len() {
            bail!(
                "adapter `{}` has {} layers, the model {}",
                a.name,
                a.weights.layers.len(),
                model.model.layers.len()
            );
        }
    }
    if let Some(i) = sequences.iter().flatten().find(|&&i| i >= adapters.len()) {
        bail!(
            "sequence adapter {i} is not among the {} given",
            adapters.len()
        );
    }
    let takers: Arc<[Vec<usize>]> = (0..adapters.len())
        .map(|a| {
            (0..sequences.len())
                .filter(|&q| sequences[q] == Some(a))
                .collect()
        })
        .collect();
    let mut view = model.clone();
    for (l, layer) in view.model.layers.iter_mut().enumerate() {
        for (j, p) in lora::projections_mut(layer).into_iter().enumerate() {
            let pairs: Vec<Option<LoraPair<B>>> = adapters
                .iter()
                .map(|a| a.weights.layers[l][j].clone())
                .collect();
            if let Some(pair) = pairs.iter().flatten().next() {
                let [d_in, d_out] = p.dims();
                if pair.a.dims()[0] != d_in || pair.b.dims()[1] != d_out {
                    bail!("an adapter does not fit layer {l}'s projection {j}");
                }
            }
            p.rows.0 = pairs.iter().any(Option::is_some).then(|| {
                Arc::new(RowLora {
                    pairs,
                    takers: takers.clone(),
                    sequences: sequences.len(),
                })
            });
        }
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::small_matmul::decode_scope;
    use crate::CpuBackend;

    fn tiny() -> Model<CpuBackend> {
        let cfg = crate::ModelConfig::qwen3(300, 64, 96, 2, 4, 2, 16, true);
        crate::random_model::<CpuBackend>(cfg, 7, &Default::default()).unwrap()
    }

    fn served(model: &Model<CpuBackend>, name: &str, seed: u64) -> Arc<ServedAdapter<CpuBackend>> {
        let cfg = LoraConfig {
            rank: 4,
            ..LoraConfig::default()
        };
        Arc::new(ServedAdapter {
            name: name.into(),
            version: 1,
            weights: AdapterWeights::random(model, &cfg, seed, 0.05).unwrap(),
        })
    }

    fn hidden(model: &Model<CpuBackend>, ids: Vec<i64>, n: usize) -> Vec<f32> {
        let s = ids.len() / n;
        let dev = Default::default();
        let tokens = Tensor::<CpuBackend, 2, Int>::from_data(TensorData::new(ids, [n, s]), &dev);
        let ctx = crate::model::attention::AttnContext {
            rope: model.rope_from_zero(n, s, &dev),
            key_mask: None,
        };
        // SAFETY: a forward pass and a copy of its result.
        unsafe { decode_scope(|| crate::weights::to_f32_vec(model.hidden(tokens, &ctx, None))) }
    }

    /// Rows of three adapters and none, in one pass, give each row the bits it gets alone with
    /// its adapter (or alone on the base).
    #[test]
    fn a_row_in_a_mixed_batch_gets_the_bits_it_gets_alone() {
        let base = tiny();
        let adapters = vec![
            served(&base, "a", 1),
            served(&base, "b", 2),
            served(&base, "c", 3),
        ];
        let assignment = [Some(0), None, Some(2), Some(1), Some(0)];
        let ids: Vec<i64> = vec![5, 9, 11, 3, 2];
        let mixed = hidden(
            &rows_view(&base, &adapters, &assignment).unwrap(),
            ids.clone(),
            5,
        );
        let d = mixed.len() / 5;
        for (r, a) in assignment.iter().enumerate() {
            let alone = match a {
                Some(i) => rows_view(&base, &adapters[*i..=*i], &[Some(0)]).unwrap(),
                None => base.clone(),
            };
            let want = hidden(&alone, vec![ids[r]], 1);
            assert_eq!(&mixed[r * d..(r + 1) * d], &want[..], "row {r}");
        }
        // The adapters change what the rows compute.
        let plain = hidden(&base, ids, 5);
        assert_ne!(&plain[..d], &mixed[..d]);
        assert_eq!(
            &plain[d..2 * d],
            &mixed[d..2 * d],
            "the row without an adapter"
        );
    }

    /// The CPU kernel and burn's own operations give the same bits.
    #[test]
    fn the_cpu_kernel_gives_the_bits_of_burns_path() {
        let base = tiny();
        let adapters = [served(&base, "a", 1), served(&base, "b", 2)];
        let pair = |i: usize| adapters[i].weights.layers[0][0].clone().unwrap();
        let (pa, pb) = (pair(0), pair(1));
        let [d_in, _] = pa.a.dims();
        let d_out = pa.b.dims()[1];
        let dev = Default::default();
        let mut rng = Rng::new(3);
        let mut random =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform() as f32 - 0.5).collect() };
        let x =
            Tensor::<CpuBackend, 2>::from_data(TensorData::new(random(5 * d_in), [5, d_in]), &dev);
        let y = Tensor::<CpuBackend, 2>::from_data(
            TensorData::new(random(5 * d_out), [5, d_out]),
            &dev,
        );
        // SAFETY: the closure leaves nothing on the pool's thread.
        let (fast, burn) = unsafe {
            decode_scope(|| {
                let groups = vec![(&pa, vec![0, 3]), (&pb, vec![1, 2, 4])];
                let fast = crate::kernels::lora_rows::try_add_rows(&y, &x, &groups)
                    .expect("the CPU kernel takes a decode step");
                (fast, add_groups(y.clone(), x.clone(), groups))
            })
        };
        assert_eq!(
            fast.into_data().to_vec::<f32>().unwrap(),
            burn.into_data().to_vec::<f32>().unwrap()
        );
    }

    /// A directory store loads a user's adapter when first asked, again when its file changes
    /// (the next version), holds at most its cap, keeps an evicted adapter alive for whoever
    /// holds it, and has none for a user without a directory.
    #[test]
    fn a_directory_store_loads_reloads_and_evicts_beyond_its_cap() {
        let base = tiny();
        let cfg = LoraConfig {
            rank: 4,
            ..LoraConfig::default()
        };
        let tmp = tempfile::tempdir().unwrap();
        let save = |name: &str, seed: u64| {
            let w = AdapterWeights::random(&base, &cfg, seed, 0.1).unwrap();
            lora::save_adapters(
                &w.attached_to(&base).unwrap(),
                &cfg,
                "base",
                &tmp.path().join(name),
            )
            .unwrap();
        };
        save("alice", 1);
        save("bob", 2);
        let store = AdapterStore::over_dir(tmp.path(), 1, &base).unwrap();
        assert!(
            store.get("carol").unwrap().is_none(),
            "no directory: the base"
        );
        assert!(store.get("../etc").is_err());
        let alice = store.get("alice").unwrap().unwrap();
        assert_eq!(alice.version, 1);
        assert!(
            Arc::ptr_eq(&alice, &store.get("alice").unwrap().unwrap()),
            "held, not reloaded"
        );
        let bob = store.get("bob").unwrap().unwrap();
        assert_eq!((store.held(), store.names()), (1, vec![Arc::from("bob")]));
        // Alice was evicted but her holder still has her; asked again she is loaded again
        // from the same file, under the same version (the same weights: prompts cached for
        // them still hold).
        assert_eq!(alice.name.as_ref(), "alice");
        assert_eq!(store.get("alice").unwrap().unwrap().version, 1);
        // A newer file is the next version, whether bob was evicted meanwhile or held.
        std::thread::sleep(std::time::Duration::from_millis(20));
        save("bob", 3);
        let newer = store.get("bob").unwrap().unwrap();
        assert_eq!(newer.version, 2, "bob was evicted: loaded afresh");
        assert!(!Arc::ptr_eq(&bob, &newer));
        std::thread::sleep(std::time::Duration::from_millis(20));
        save("bob", 4);
        assert_eq!(
            store.get("bob").unwrap().unwrap().version,
            3,
            "held and changed: next version"
        );
        // A trainer's checkpoint names its step: the version is at least that, so versions
        // go on across restarts of the server.
        save("carol", 5);
        std::fs::write(
            tmp.path().join("carol/trainer_state.json"),
            r#"{"format": 1, "state": {"step": 40, "weight_version": 0, "data_position": 9}}"#,
        )
        .unwrap();
        assert_eq!(store.get("carol").unwrap().unwrap().version, 40);
    }

    /// An adapter served in a view computes what the same adapter attached to the model does.
    #[test]
    fn a_view_computes_what_the_attached_adapter_does() {
        let base = tiny();
        let cfg = LoraConfig {
            rank: 4,
            ..LoraConfig::default()
        };
        let attached = lora::attach(base.clone(), &cfg, 5).unwrap();
        let served = Arc::new(ServedAdapter {
            name: "x".into(),
            version: 1,
            weights: AdapterWeights::of(&attached).unwrap(),
        });
        let ids: Vec<i64> = vec![1, 4, 9, 16];
        let view = rows_view(&base, &[served], &[Some(0)]).unwrap();
        assert_eq!(hidden(&view, ids.clone(), 1), hidden(&attached, ids, 1));
    }
}
