//! The recipe of the default model: every number that decides its bytes, and a hash over them
//! and over the data they generate.

use openclaw_chat::{ChatMessage, CHATML_TEMPLATE};
use openclaw_sim::sft::{conversations, SftMix};
use openclaw_sim::{TaskKind, TaskSet};
use serde::{Deserialize, Serialize};

/// Bump when the build code changes what it makes from the same recipe (how the corpus or
/// the batches are formed, say). Changes inside the dependencies (tokenizer training, the
/// trainer's numerics) are not seen by the hash either: bump this for them too.
pub const BUILD_FORMAT: u32 = 1;

/// Everything the default model is built from. The defaults follow the recipe measured in
/// `reference/tiny-learning.md`, with fewer SFT steps (see [`Recipe::default`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    /// [`BUILD_FORMAT`] of the code that built it.
    pub format: u32,
    /// SFT conversations generated from the training tasks.
    pub conversations: usize,
    /// Seeds the conversations.
    pub data_seed: u64,
    /// Share of the conversations that ask arithmetic; the other four kinds share the rest
    /// equally (see [`Recipe::conversations`]).
    pub arithmetic_share: f64,
    /// Share of conversations without a hint line.
    pub no_hint: f64,
    /// Share of plain answers among those without a hint (the rest are markdown).
    pub plain_prior: f64,
    /// Share of conversations with a plain hint (the other hinted ones get a markdown hint).
    pub plain_hint: f64,
    /// How often a hinted answer follows its hint.
    pub hint_follow: f64,
    /// Vocabulary target of the byte-level BPE (the templated corpus runs out of merges
    /// earlier; the model is sized by the real vocabulary).
    pub vocab_size: usize,
    /// Model width.
    pub hidden_size: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads.
    pub num_key_value_heads: usize,
    /// Width of a head.
    pub head_dim: usize,
    /// Output projection shares the embedding.
    pub tie_word_embeddings: bool,
    /// Context length. The simulated world's requests need at most about 250 tokens, but an
    /// agent client brings tool definitions (about 310 tokens for one) and repeats the whole
    /// conversation each turn: 2,048 lets such a client hold a conversation of several turns
    /// with tools. (Positions are RoPE's, computed, not learned: the SFT is the same.)
    pub max_position_embeddings: usize,
    /// RoPE base.
    pub rope_theta: f64,
    /// Seeds the initial weights.
    pub init_seed: u64,
    /// SFT optimizer steps.
    pub steps: u64,
    /// Sequences per step.
    pub batch_size: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Linear warmup steps.
    pub warmup_steps: u64,
    /// The cosine's floor, reached at the last step.
    pub min_lr: f64,
    /// AdamW first-moment decay.
    pub adam_beta1: f64,
    /// AdamW second-moment decay.
    pub adam_beta2: f64,
    /// AdamW epsilon.
    pub adam_eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Global gradient-norm clip.
    pub max_grad_norm: f64,
    /// Micro-batches run side by side. Part of the recipe because it decides how a step's
    /// gradient is summed, and so the last bits of the weights.
    pub data_parallel: usize,
    /// Seeds the order of the data.
    pub train_seed: u64,
    /// The written weights are an exponential moving average of the trained ones with this
    /// decay per step, started half-way through (0: the last step's weights). Averaging
    /// removes the step-to-step jitter of the no-hint style prior, which the last batches'
    /// random style mix otherwise moves by up to ±0.08 (measured every 50 steps over the
    /// second half of a 1,000-step build: 0.27 to 0.41 plain).
    pub ema_decay: f64,
    /// Element type of the written weights: `float32` or `bfloat16`.
    pub dtype: String,
}

impl Default for Recipe {
    /// tiny-learning's recipe (1.0 M parameters, 40k conversations of openclaw-sim's mix,
    /// AdamW (0.9, 0.95), wd 0.01, clip 1.0, peak lr 3e-3 with 50 warmup steps and a cosine
    /// to 3e-4, batch 32) with 1,000 SFT steps instead of 1,800, kind-weighted data and a
    /// weight average. burn trains this model at about 0.22 s a step on two cores, so 1,000
    /// steps take under 4 minutes; with the average they give the behaviour the default needs
    /// (the evaluation is recorded in `host/lab/assets/default-model/recipe.json`).
    fn default() -> Self {
        let mix = SftMix::default();
        Recipe {
            format: BUILD_FORMAT,
            conversations: 40_000,
            data_seed: 0,
            arithmetic_share: 0.4,
            no_hint: mix.no_hint,
            plain_prior: mix.plain_prior,
            plain_hint: mix.plain_hint,
            hint_follow: mix.hint_follow,
            vocab_size: 2048,
            hidden_size: 128,
            intermediate_size: 384,
            num_hidden_layers: 4,
            num_attention_heads: 4,
            num_key_value_heads: 2,
            head_dim: 32,
            tie_word_embeddings: true,
            max_position_embeddings: 2048,
            rope_theta: 10_000.0,
            init_seed: 0,
            steps: 1000,
            batch_size: 32,
            lr: 3e-3,
            warmup_steps: 50,
            min_lr: 3e-4,
            adam_beta1: 0.9,
            adam_beta2: 0.95,
            adam_eps: 1e-8,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            data_parallel: 2,
            train_seed: 0,
            ema_decay: 0.99,
            dtype: "float32".into(),
        }
    }
}

/// Conversations of kind number `k` (in the order animal, tips, arithmetic, concept,
/// category) out of `total`: arithmetic gets `share` of them, the others equal parts of the
/// rest, the first ones one more until the counts add up.
fn kind_count(total: usize, share: f64, k: usize) -> usize {
    let arithmetic = ((total as f64) * share.clamp(0.0, 1.0)).round() as usize;
    if k == 2 {
        return arithmetic;
    }
    let rest = total - arithmetic;
    let slot = if k < 2 { k } else { k - 1 };
    rest / 4 + usize::from(slot < rest % 4)
}

/// FNV-1a, 64 bits: stable across Rust versions and platforms (the std hasher is not), and
/// enough to tell recipes apart (this is a cache key, not a defence against forgery).
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x1000_0000_01b3);
        }
    }

    /// Writes a length first, so that ("ab", "c") and ("a", "bc") differ.
    pub(crate) fn field(&mut self, bytes: &[u8]) {
        self.write(&(bytes.len() as u64).to_le_bytes());
        self.write(bytes);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

impl Recipe {
    /// The SFT mix of openclaw-sim this recipe asks for.
    pub fn mix(&self) -> SftMix {
        SftMix {
            no_hint: self.no_hint,
            plain_prior: self.plain_prior,
            plain_hint: self.plain_hint,
            hint_follow: self.hint_follow,
        }
    }

    /// The SFT conversations, from the training split of the tasks only, drawn kind by kind:
    /// `arithmetic_share` of them arithmetic, the rest split equally over the other four
    /// kinds. Drawn uniformly over tasks, arithmetic (304 training prompts against 28 tips)
    /// would be 62% and starve the others (measured at 1,000 steps: tips on topic in 0.65-0.85
    /// of held-out prompts); an equal fifth starves arithmetic, whose 162 facts each need many
    /// examples (on topic 0.35). Kinds are interleaved round-robin.
    pub fn conversations(&self) -> Vec<Vec<ChatMessage>> {
        const KINDS: [TaskKind; 5] = [
            TaskKind::Animal,
            TaskKind::Tips,
            TaskKind::Arithmetic,
            TaskKind::Concept,
            TaskKind::Category,
        ];
        let train = TaskSet::standard().train;
        let per_kind: Vec<Vec<serde_json::Value>> = KINDS
            .iter()
            .enumerate()
            .map(|(k, kind)| {
                let tasks: Vec<_> = train.iter().filter(|t| t.kind == *kind).cloned().collect();
                let n = kind_count(self.conversations, self.arithmetic_share, k);
                conversations(&tasks, n, self.mix(), self.data_seed.wrapping_add(k as u64))
            })
            .collect();
        let longest = per_kind.iter().map(Vec::len).max().unwrap_or(0);
        (0..longest)
            .flat_map(|i| per_kind.iter().filter_map(move |v| v.get(i)))
            .map(|c| {
                serde_json::from_value(c["messages"].clone())
                    .expect("openclaw-sim writes valid chat messages")
            })
            .collect()
    }

    /// The recipe's hash: its numbers, the conversations they generate (so a change of
    /// openclaw-sim's tasks or answers counts as a new recipe) and the chat template the
    /// tokenizer is written with. 16 hex digits.
    pub fn hash(&self) -> String {
        self.hash_with(&self.conversations())
    }

    /// [`Recipe::hash`] over conversations already generated.
    pub(crate) fn hash_with(&self, convs: &[Vec<ChatMessage>]) -> String {
        let mut h = Fnv::new();
        h.field(
            serde_json::to_string(self)
                .expect("a recipe serialises")
                .as_bytes(),
        );
        h.field(CHATML_TEMPLATE.as_bytes());
        for c in convs {
            h.write(&(c.len() as u64).to_le_bytes());
            for m in c {
                h.field(m.role.as_bytes());
                h.field(m.text().as_bytes());
            }
        }
        format!("{:016x}", h.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_stable_and_sees_every_setting() {
        let r = Recipe {
            conversations: 200,
            ..Recipe::default()
        };
        let h = r.hash();
        assert_eq!(h.len(), 16);
        assert_eq!(h, r.clone().hash(), "same recipe, same hash");
        let changed = |f: &dyn Fn(&mut Recipe)| {
            let mut c = r.clone();
            f(&mut c);
            c.hash()
        };
        assert_ne!(h, changed(&|c| c.steps += 1));
        assert_ne!(h, changed(&|c| c.lr *= 1.5));
        assert_ne!(h, changed(&|c| c.data_seed = 1));
        assert_ne!(h, changed(&|c| c.dtype = "bfloat16".into()));
        assert_ne!(h, changed(&|c| c.format += 1));
    }

    #[test]
    fn the_kinds_get_their_shares_of_the_conversations() {
        let r = Recipe {
            conversations: 1003,
            arithmetic_share: 0.4,
            ..Recipe::default()
        };
        let convs = r.conversations();
        assert_eq!(convs.len(), 1003);
        let tasks = TaskSet::standard().train;
        let mut counts = std::collections::HashMap::new();
        for c in &convs {
            let user = c[0].text();
            let prompt = user.split("\n\n").next().unwrap_or_default();
            let task = tasks
                .iter()
                .find(|t| t.prompt == prompt)
                .expect("a training task");
            *counts.entry(task.kind).or_insert(0usize) += 1;
        }
        assert_eq!(counts.len(), 5);
        assert_eq!(counts[&TaskKind::Arithmetic], 401);
        for (kind, n) in &counts {
            assert!(
                *kind == TaskKind::Arithmetic || *n == 150 || *n == 151,
                "{counts:?}"
            );
        }
        assert_eq!(convs, r.conversations(), "deterministic");
    }

    #[test]
    fn the_defaults_are_openclaw_sims_mix_and_the_measured_recipe() {
        let r = Recipe::default();
        let mix = SftMix::default();
        assert_eq!(
            (r.no_hint, r.plain_prior, r.plain_hint, r.hint_follow),
            (
                mix.no_hint,
                mix.plain_prior,
                mix.plain_hint,
                mix.hint_follow
            )
        );
        // 60% no hint at 70/30 markdown/plain, 25% plain hint, 15% markdown hint, 95% follow.
        assert_eq!((r.no_hint, r.plain_prior), (0.60, 0.30));
        assert_eq!((r.plain_hint, r.hint_follow), (0.25, 0.95));
        assert_eq!(
            (r.adam_beta1, r.adam_beta2, r.weight_decay),
            (0.9, 0.95, 0.01)
        );
        assert_eq!(
            (r.lr, r.warmup_steps, r.min_lr, r.batch_size),
            (3e-3, 50, 3e-4, 32)
        );
    }

    #[test]
    fn conversations_use_training_tasks_only() {
        let r = Recipe {
            conversations: 2000,
            ..Recipe::default()
        };
        let held_out: std::collections::HashSet<String> = TaskSet::standard()
            .eval
            .into_iter()
            .map(|t| t.prompt)
            .collect();
        for c in r.conversations() {
            let user = c[0].text();
            let task = user.split("\n\n").next().unwrap_or_default();
            assert!(!held_out.contains(task), "{task}");
        }
    }
}
