//! Generation: determinism, batching, stops, logprob recomputation and alignment, weight swaps.

mod common;

use std::sync::Arc;

use burn::prelude::*;
use common::*;
use openclaw_engine::adapters::{AdapterWeights, ServedAdapter};
use openclaw_engine::generate::{
    Allowed, Constraint, ConstraintFactory, PrefixCache, PrefixCacheOptions,
};
use openclaw_engine::lora::LoraConfig;
use openclaw_engine::score::ScoreOptions;
use openclaw_engine::{
    generate, score, DecodeBatch, Detokenizer, FinishReason, GenerateRequest, Generation,
    Published, SamplingParams, ScoreRequest, StopMatch,
};

fn request(prompt: Vec<u32>, max: usize, sampling: SamplingParams, seed: u64) -> GenerateRequest {
    GenerateRequest {
        sampling,
        seed,
        ..GenerateRequest::new(prompt, max)
    }
}

fn prompts() -> Vec<Vec<u32>> {
    vec![
        vec![3, 14, 15, 92, 65, 35, 89],
        vec![27, 18],
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
    ]
}

fn sampled() -> SamplingParams {
    SamplingParams {
        temperature: 0.9,
        top_k: 40,
        top_p: 0.95,
    }
}

#[test]
fn same_seed_same_tokens() {
    let w = tiny_weights(1);
    let reqs: Vec<_> = prompts()
        .into_iter()
        .map(|p| request(p, 20, sampled(), 7))
        .collect();
    let a = generate(w.clone(), reqs.clone(), None).unwrap();
    let b = generate(w.clone(), reqs, None).unwrap();
    assert_eq!(a, b);
    // A different seed takes a different path (the distribution is not degenerate).
    let other = generate(
        w,
        vec![request(prompts()[0].clone(), 20, sampled(), 8)],
        None,
    )
    .unwrap();
    assert_ne!(other[0].token_ids, a[0].token_ids);
}

#[test]
fn batched_greedy_equals_one_at_a_time() {
    let w = tiny_weights(2);
    let reqs: Vec<_> = prompts()
        .into_iter()
        .map(|p| request(p, 12, SamplingParams::greedy(), 0))
        .collect();
    let together = generate(w.clone(), reqs.clone(), None).unwrap();
    for (r, g) in reqs.into_iter().zip(&together) {
        let alone = generate(w.clone(), vec![r], None).unwrap().remove(0);
        assert_eq!(alone.token_ids, g.token_ids);
        for (a, b) in alone.logprobs.iter().zip(&g.logprobs) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }
}

#[test]
fn batched_sampling_is_independent_of_batch_mates() {
    // Each sequence owns its random stream and positions, so with the same seed it samples the
    // same tokens alone or beside others.
    let w = tiny_weights(3);
    let reqs: Vec<_> = prompts()
        .into_iter()
        .enumerate()
        .map(|(i, p)| request(p, 16, sampled(), 100 + i as u64))
        .collect();
    let together = generate(w.clone(), reqs.clone(), None).unwrap();
    for (r, g) in reqs.into_iter().zip(&together) {
        let alone = generate(w.clone(), vec![r], None).unwrap().remove(0);
        assert_eq!(alone.token_ids, g.token_ids);
    }
}

fn recompute(
    w: &Arc<openclaw_engine::Versioned<openclaw_engine::Model<B>>>,
    g: &Generation,
    s: SamplingParams,
) -> Vec<f32> {
    let req = ScoreRequest {
        sampling: s,
        ..ScoreRequest::new(g.prompt_ids.clone(), g.token_ids.clone())
    };
    score(&w.model, &[req], &ScoreOptions::default())
        .unwrap()
        .remove(0)
        .logprobs
}

#[test]
fn recomputed_logprobs_match_recorded() {
    let w = tiny_weights(4);
    for s in [
        sampled(),
        SamplingParams::default(),
        SamplingParams::greedy(),
        SamplingParams {
            temperature: 0.7,
            top_k: 5,
            top_p: 1.0,
        },
    ] {
        let reqs: Vec<_> = prompts()
            .into_iter()
            .map(|p| request(p, 24, s, 5))
            .collect();
        let gens = generate(w.clone(), reqs, None).unwrap();
        for g in &gens {
            let again = recompute(&w, g, s);
            assert_eq!(again.len(), g.logprobs.len());
            for (i, (a, b)) in again.iter().zip(&g.logprobs).enumerate() {
                assert!(a.is_finite());
                assert!(
                    (a - b).abs() <= 1e-5,
                    "{s:?} token {i}: recorded {b}, recomputed {a}"
                );
            }
        }
    }
}

#[test]
fn scoring_is_batched_and_chunked_consistently() {
    let w = tiny_weights(4);
    let reqs: Vec<_> = prompts()
        .into_iter()
        .map(|p| request(p, 10, sampled(), 9))
        .collect();
    let gens = generate(w.clone(), reqs, None).unwrap();
    let sreqs: Vec<ScoreRequest> = gens
        .iter()
        .map(|g| ScoreRequest {
            top_k: 3,
            ..ScoreRequest::new(g.prompt_ids.clone(), g.token_ids.clone())
        })
        .collect();
    let big = score(&w.model, &sreqs, &ScoreOptions::default()).unwrap();
    let small = score(
        &w.model,
        &sreqs,
        &ScoreOptions {
            chunk_positions: 3,
            max_batch_tokens: 20,
        },
    )
    .unwrap();
    for (a, b) in big.iter().zip(&small) {
        assert_eq!(a.top_logprobs.len(), a.logprobs.len());
        for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
            assert!((x - y).abs() < 1e-5);
        }
        for (ta, tb) in a.top_logprobs.iter().zip(&b.top_logprobs) {
            assert_eq!(
                ta.iter().map(|t| t.0).collect::<Vec<_>>(),
                tb.iter().map(|t| t.0).collect::<Vec<_>>()
            );
            // Most likely first, and each scored token's logprob is bounded by the best one.
            assert!(ta.windows(2).all(|p| p[0].1 >= p[1].1));
        }
        for (lp, top) in a.logprobs.iter().zip(&a.top_logprobs) {
            assert!(*lp <= top[0].1 + 1e-6);
        }
    }
}

#[test]
fn response_logprob_is_taken_where_the_token_is_predicted() {
    let w = tiny_weights(5);
    let prompt = vec![5u32, 9, 2];
    let response = vec![17u32, 4, 88];
    let got = score(
        &w.model,
        &[ScoreRequest::new(prompt.clone(), response.clone())],
        &ScoreOptions::default(),
    )
    .unwrap()
    .remove(0)
    .logprobs;
    // Full forward over prompt+response: the logits at index len(prompt)+i-1 predict response[i].
    let all: Vec<u32> = prompt.iter().chain(&response).copied().collect();
    let logits = logits_of(&w.model, &all);
    let v = w.model.config.vocab_size;
    for (i, &t) in response.iter().enumerate() {
        let row = &logits[(prompt.len() + i - 1) * v..(prompt.len() + i) * v];
        let m = row.iter().fold(f32::MIN, |a, &b| a.max(b));
        let lse = m + row.iter().map(|x| (x - m).exp()).sum::<f32>().ln();
        assert!(
            (got[i] - (row[t as usize] - lse)).abs() < 1e-5,
            "response token {i}"
        );
    }
    // And the first generated token's recorded logprob comes from the last prompt position.
    let g = generate(
        w.clone(),
        vec![request(prompt.clone(), 1, SamplingParams::default(), 3)],
        None,
    )
    .unwrap()
    .remove(0);
    let first = score(
        &w.model,
        &[ScoreRequest::new(prompt, g.token_ids.clone())],
        &ScoreOptions::default(),
    )
    .unwrap()
    .remove(0);
    assert!((first.logprobs[0] - g.logprobs[0]).abs() < 1e-5);
}

#[test]
fn top_k_restricts_samples() {
    let w = tiny_weights(6);
    let s = SamplingParams {
        temperature: 1.5,
        top_k: 3,
        top_p: 1.0,
    };
    let g = generate(
        w.clone(),
        vec![request(prompts()[0].clone(), 30, s, 1)],
        None,
    )
    .unwrap()
    .remove(0);
    let top = score(
        &w.model,
        &[ScoreRequest {
            top_k: 3,
            ..ScoreRequest::new(g.prompt_ids.clone(), g.token_ids.clone())
        }],
        &ScoreOptions::default(),
    )
    .unwrap()
    .remove(0);
    for (i, t) in g.token_ids.iter().enumerate() {
        assert!(
            top.top_logprobs[i].iter().any(|(id, _)| id == t),
            "token {i} not in the top 3"
        );
    }
    // top_k = 1 is greedy.
    let one = SamplingParams {
        temperature: 1.0,
        top_k: 1,
        top_p: 1.0,
    };
    let a = generate(
        w.clone(),
        vec![request(prompts()[1].clone(), 10, one, 1)],
        None,
    )
    .unwrap();
    let b = generate(
        w,
        vec![request(
            prompts()[1].clone(),
            10,
            SamplingParams::greedy(),
            1,
        )],
        None,
    )
    .unwrap();
    assert_eq!(a[0].token_ids, b[0].token_ids);
    assert!(
        a[0].logprobs.iter().all(|&lp| lp == 0.0),
        "a one-token distribution has logprob 0"
    );
}

#[test]
fn stop_token_ends_the_sequence() {
    let w = tiny_weights(7);
    let base = request(prompts()[0].clone(), 16, sampled(), 42);
    let free = generate(w.clone(), vec![base.clone()], None)
        .unwrap()
        .remove(0);
    assert_eq!(free.finish_reason, FinishReason::Length);
    assert_eq!(free.token_ids.len(), 16);
    let stop = free.token_ids[5];
    let first = free.token_ids.iter().position(|&t| t == stop).unwrap();
    let req = GenerateRequest {
        stop_token_ids: vec![stop],
        ..base
    };
    let g = generate(w, vec![req], None).unwrap().remove(0);
    assert_eq!(g.finish_reason, FinishReason::Stop);
    assert_eq!(g.stop, Some(StopMatch::Token(stop)));
    assert_eq!(g.token_ids, free.token_ids[..=first].to_vec());
    assert_eq!(g.logprobs, free.logprobs[..=first].to_vec());
}

struct Letters;
impl Detokenizer for Letters {
    fn decode(&self, ids: &[u32]) -> String {
        ids.iter().map(|&t| format!("<{t}>")).collect()
    }
}

#[test]
fn stop_string_ends_the_sequence() {
    let w = tiny_weights(8);
    let det: Arc<dyn Detokenizer> = Arc::new(Letters);
    let base = request(prompts()[2].clone(), 16, sampled(), 4);
    let free = generate(w.clone(), vec![base.clone()], Some(det.clone()))
        .unwrap()
        .remove(0);
    // A stop string spanning the end of token 6 and the start of token 7.
    let text6 = Letters.decode(&free.token_ids[6..8]);
    let stop = text6[text6.len() - 5..].to_string();
    assert!(!Letters.decode(&free.token_ids[..7]).contains(&stop) || stop.is_empty());
    let req = GenerateRequest {
        stop_strings: vec!["never".into(), stop.clone()],
        ..base.clone()
    };
    let g = generate(w.clone(), vec![req], Some(det)).unwrap().remove(0);
    let end = (1..=free.token_ids.len())
        .find(|&n| Letters.decode(&free.token_ids[..n]).contains(&stop))
        .unwrap();
    assert_eq!(g.finish_reason, FinishReason::Stop);
    assert_eq!(g.stop, Some(StopMatch::String(stop)));
    assert_eq!(g.token_ids, free.token_ids[..end].to_vec());
    // Stop strings without a detokenizer are refused up front.
    let req = GenerateRequest {
        stop_strings: vec!["x".into()],
        ..base
    };
    let e = generate(w, vec![req], None).unwrap_err().to_string();
    assert!(e.contains("detokenizer"), "{e}");
}

#[test]
fn finish_reasons_and_limits() {
    let w = tiny_weights(9);
    let gens = generate(
        w.clone(),
        vec![
            request(vec![1, 2], 0, sampled(), 0),
            request(vec![1, 2], 3, sampled(), 0),
        ],
        None,
    )
    .unwrap();
    assert!(gens[0].token_ids.is_empty() && gens[0].finish_reason == FinishReason::Length);
    assert_eq!(gens[1].token_ids.len(), 3);
    assert_eq!(gens[1].weight_version, 1);
    // The context length caps generation; a prompt that does not fit is refused.
    let ctx = w.model.config.max_position_embeddings;
    let g = generate(
        w.clone(),
        vec![request(vec![7; ctx - 4], 50, sampled(), 0)],
        None,
    )
    .unwrap();
    assert_eq!(g[0].token_ids.len(), 4);
    assert_eq!(g[0].finish_reason, FinishReason::Length);
    let e = generate(w, vec![request(vec![7; ctx], 5, sampled(), 0)], None).unwrap_err();
    let typed = e
        .downcast_ref::<openclaw_engine::ContextLengthExceeded>()
        .expect("typed error");
    assert_eq!((typed.prompt_tokens, typed.context), (ctx, ctx));
    assert!(e.to_string().contains("context"), "{e}");
}

#[test]
fn streaming_steps_report_each_token() {
    let w = tiny_weights(10);
    let reqs = vec![
        request(vec![4, 5, 6], 3, sampled(), 1),
        request(vec![9], 5, sampled(), 2),
    ];
    let mut batch = DecodeBatch::new(w.clone(), reqs.clone(), None).unwrap();
    let mut streamed: Vec<Vec<u32>> = vec![Vec::new(); 2];
    let mut finishes = 0;
    while !batch.is_finished() {
        for ev in batch.step() {
            streamed[ev.index].push(ev.token);
            finishes += ev.finish.is_some() as usize;
        }
    }
    assert_eq!(finishes, 2);
    let gens = batch.into_generations();
    assert_eq!(streamed[0], gens[0].token_ids);
    assert_eq!(streamed[1], gens[1].token_ids);
    assert_eq!(gens, generate(w, reqs, None).unwrap());
}

#[test]
fn a_weight_swap_does_not_touch_a_batch_in_flight() {
    let published = Published::new(tiny_weights(11).model.clone(), 1);
    let reqs = vec![request(prompts()[0].clone(), 12, sampled(), 77)];
    let expected = generate(published.current(), reqs.clone(), None).unwrap();

    let mut batch = DecodeBatch::new(published.current(), reqs, None).unwrap();
    batch.step();
    batch.step();
    // Training publishes new weights mid-generation, from another thread.
    let new = tiny_weights(12).model.clone();
    let v = std::thread::scope(|s| s.spawn(|| published.publish(new)).join().unwrap());
    assert_eq!(v, 2);
    while !batch.is_finished() {
        batch.step();
    }
    let got = batch.into_generations();
    assert_eq!(got, expected);
    assert_eq!(got[0].weight_version, 1);
    // New requests get the new weights.
    let fresh = generate(
        published.current(),
        vec![request(vec![1, 2, 3], 2, sampled(), 0)],
        None,
    )
    .unwrap();
    assert_eq!(fresh[0].weight_version, 2);
}

#[test]
fn differentiable_logprobs_agree_with_scoring() {
    use burn::backend::Autodiff;
    type AD = Autodiff<B>;
    let w = tiny_weights(13);
    let ids: Vec<u32> = vec![3, 1, 4, 1, 5, 9, 2, 6];
    let exact = score(
        &w.model,
        &[ScoreRequest {
            sampling: SamplingParams {
                temperature: 0.8,
                ..Default::default()
            },
            ..ScoreRequest::new(ids[..1].to_vec(), ids[1..].to_vec())
        }],
        &ScoreOptions::default(),
    )
    .unwrap()
    .remove(0)
    .logprobs;

    // Same weights on the autodiff backend.
    let dev = device();
    let mut src = ExportSource(w.model.export());
    let model: openclaw_engine::Model<AD> =
        openclaw_engine::Model::from_source(w.model.config.clone(), &mut src, &dev).unwrap();
    let x = Tensor::<AD, 2, Int>::from_data(
        TensorData::new(
            ids[..7].iter().map(|&t| t as i64).collect::<Vec<_>>(),
            [1, 7],
        ),
        &dev,
    );
    let y = Tensor::<AD, 2, Int>::from_data(
        TensorData::new(
            ids[1..].iter().map(|&t| t as i64).collect::<Vec<_>>(),
            [1, 7],
        ),
        &dev,
    );
    let lp = openclaw_engine::token_logprobs(&model, x, y, 0.8, 3);
    let vals = lp.clone().into_data().to_vec::<f32>().unwrap();
    for (a, b) in vals.iter().zip(&exact) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
    let grads = lp.sum().backward();
    let g = model.model.layers[0]
        .self_attn
        .q_proj
        .dense_weight()
        .expect("f32 weights")
        .val()
        .grad(&grads)
        .expect("gradient reaches q_proj");
    assert!(g.abs().sum().into_scalar() > 0.0);
}

/// Feeds exported tensors back in (moves weights across backends).
struct ExportSource(Vec<openclaw_engine::weights::TensorExport>);
impl openclaw_engine::weights::WeightSource for ExportSource {
    fn tensor(&mut self, name: &str, shape: &[usize]) -> anyhow::Result<Vec<f32>> {
        let t = self
            .0
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| anyhow::anyhow!("no {name}"))?;
        assert_eq!(t.shape, shape);
        Ok(t.data.clone())
    }
}

#[test]
fn batches_and_weights_can_move_across_threads() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<DecodeBatch<B>>();
    send_sync::<Published<openclaw_engine::Model<B>>>();
}

#[test]
fn parallel_groups_give_the_same_generations() {
    let w = tiny_weights(14);
    let reqs: Vec<_> = prompts()
        .into_iter()
        .chain(prompts())
        .enumerate()
        .map(|(i, p)| request(p, 10, sampled(), i as u64))
        .collect();
    let one = generate(w.clone(), reqs.clone(), None).unwrap();
    let two = openclaw_engine::generate_parallel(w.clone(), reqs.clone(), None, 2).unwrap();
    let many = openclaw_engine::generate_parallel(w, reqs, None, 16).unwrap();
    assert_eq!(one, two);
    assert_eq!(one, many);
}

/// A prompt prefix reused from the prefix cache gives what computing it gives: the same greedy
/// tokens and logprobs, alone and in a batch beside a prompt without a cached prefix, also past
/// the length where attention switches to its tiled form; another weight version reuses
/// nothing.
#[test]
fn a_reused_prompt_prefix_generates_what_a_computed_one_does() {
    use openclaw_engine::{PrefixCache, PrefixCacheOptions};
    let mut config = tiny_config();
    config.max_position_embeddings = 1024;
    let model = openclaw_engine::random_model::<B>(config, 5, &device()).unwrap();
    let w = Arc::new(openclaw_engine::Versioned {
        version: 1,
        model: scale_embeddings(model, 40.0),
    });
    let vocab = 128u32;
    let tokens = |seed: u32, n: usize| -> Vec<u32> {
        (0..n as u32)
            .map(|i| (i.wrapping_mul(2654435761).wrapping_add(seed * 97) >> 7) % vocab)
            .collect()
    };
    for shared in [40usize, 700] {
        let first = tokens(1, shared + 12);
        let mut second = first[..shared].to_vec();
        second.extend(tokens(2, 9));
        let other = tokens(3, 25);
        let greedy = |p: &Vec<u32>| request(p.clone(), 8, SamplingParams::greedy(), 0);
        let mut cache = PrefixCache::<B>::new(PrefixCacheOptions {
            budget_bytes: 64 << 20,
            min_tokens: 16,
        });
        let run = |cache: Option<&mut PrefixCache<B>>, reqs: Vec<GenerateRequest>| {
            let mut b = DecodeBatch::with_prefix_cache(w.clone(), reqs, None, cache).unwrap();
            while !b.is_finished() {
                b.step();
            }
            b.into_generations()
        };
        run(Some(&mut cache), vec![greedy(&first)]);
        assert_eq!(cache.stats().hits, 0);
        let reused = run(Some(&mut cache), vec![greedy(&second), greedy(&other)]);
        let s = cache.stats();
        assert_eq!((s.hits, s.reused_tokens), (1, shared as u64), "{s:?}");
        let computed = run(None, vec![greedy(&second), greedy(&other)]);
        for (a, b) in reused.iter().zip(&computed) {
            assert_eq!(a.token_ids, b.token_ids, "shared {shared}");
            for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
                assert!((x - y).abs() < 1e-3, "shared {shared}: {x} vs {y}");
            }
        }
        // New weights: nothing cached is valid any more.
        let newer = Arc::new(openclaw_engine::Versioned {
            version: 2,
            model: w.model.clone(),
        });
        let mut b =
            DecodeBatch::with_prefix_cache(newer, vec![greedy(&second)], None, Some(&mut cache))
                .unwrap();
        b.step();
        assert_eq!(cache.stats().hits, 1, "no reuse across weight versions");
    }
}

#[test]
fn long_generations_outgrow_their_reserved_cache_and_keep_recomputed_logprobs() {
    // Past the cache's reservation (positions are reserved at most MAX_RESERVE_AHEAD ahead),
    // with rows of different prompt lengths (holes hidden by the key mask) and one row leaving
    // early (its cache rows dropped): every recorded logprob still equals the one a scoring
    // pass computes without a cache, and the autodiff backend, which keeps the cache as
    // concatenated tensors, samples the same tokens.
    use openclaw_engine::kernels::host_kv::MAX_RESERVE_AHEAD;
    let mut config = tiny_config();
    config.max_position_embeddings = 2048;
    let model = openclaw_engine::random_model::<B>(config, 9, &device()).unwrap();
    let model = scale_embeddings(model, 40.0);
    let long = MAX_RESERVE_AHEAD + 150;
    let reqs = |long: usize| {
        prompts()
            .into_iter()
            .zip([long, long - 40, 30])
            .map(|(p, max)| request(p, max, sampled(), 11))
            .collect::<Vec<_>>()
    };
    let w = Arc::new(openclaw_engine::Versioned {
        version: 1,
        model: model.clone(),
    });
    let gens = generate(w.clone(), reqs(long), None).unwrap();
    assert_eq!(gens[0].token_ids.len(), long);
    for g in &gens {
        let again = recompute(&w, g, sampled());
        for (i, (a, b)) in again.iter().zip(&g.logprobs).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4,
                "token {i}: recorded {b}, recomputed {a}"
            );
        }
    }
    type A = burn::backend::Autodiff<B>;
    let on_autodiff: openclaw_engine::Model<A> = burn::module::AutodiffModule::from_inner(model);
    let wa = Arc::new(openclaw_engine::Versioned {
        version: 1,
        model: on_autodiff,
    });
    let short = 40;
    let tensors_path = generate(wa, reqs(short), None).unwrap();
    let host_path = generate(w, reqs(short), None).unwrap();
    for (a, b) in tensors_path.iter().zip(&host_path) {
        assert_eq!(a.token_ids, b.token_ids);
        for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
            assert!((x - y).abs() <= 1e-4, "{x} vs {y}");
        }
    }
}

/// A grammar of token ids: `0 1 2 .. n-1` then one of `ends`, then nothing more.
#[derive(Debug)]
struct Counting {
    n: u32,
    at: u32,
    ends: Vec<u32>,
}

impl Constraint for Counting {
    fn allowed(&mut self) -> anyhow::Result<Allowed> {
        Ok(if self.at < self.n {
            Allowed::Only(vec![self.at])
        } else if self.at == self.n {
            Allowed::Only(self.ends.clone())
        } else {
            Allowed::Only(Vec::new())
        })
    }
    fn accept(&mut self, token: u32) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.at < self.n || self.ends.contains(&token),
            "not allowed: {token}"
        );
        self.at += 1;
        Ok(())
    }
}

#[derive(Debug)]
struct CountingFactory(u32, Vec<u32>);

impl ConstraintFactory for CountingFactory {
    fn start(&self) -> anyhow::Result<Box<dyn Constraint>> {
        Ok(Box::new(Counting {
            n: self.0,
            at: 0,
            ends: self.1.clone(),
        }))
    }
}

#[test]
fn a_grammar_decides_every_token_and_its_logprob_is_the_masked_ones() {
    let w = tiny_weights(11);
    let stop = 9u32;
    let constrained = GenerateRequest {
        stop_token_ids: vec![stop],
        constraint: Some(Arc::new(CountingFactory(5, vec![stop]))),
        ..request(prompts()[0].clone(), 20, sampled(), 3)
    };
    let free = GenerateRequest {
        stop_token_ids: vec![stop],
        ..request(prompts()[1].clone(), 20, sampled(), 3)
    };
    // Batched with an unconstrained sequence, which the grammar does not touch.
    let gens = generate(w.clone(), vec![constrained.clone(), free.clone()], None).unwrap();
    assert_eq!(gens[0].token_ids, [0, 1, 2, 3, 4, stop]);
    assert_eq!(gens[0].finish_reason, FinishReason::Stop);
    assert_eq!(gens[0].stop, Some(StopMatch::Token(stop)));
    // One allowed token each step: probability 1 under the distribution sampled from.
    assert!(
        gens[0].logprobs.iter().all(|&lp| lp == 0.0),
        "{:?}",
        gens[0].logprobs
    );
    let alone = generate(w.clone(), vec![free], None).unwrap();
    assert_eq!(gens[1].token_ids, alone[0].token_ids);

    // Two choices at the end: sampled among them alone, with their renormalised logprob.
    let two = GenerateRequest {
        stop_token_ids: vec![7, 8],
        constraint: Some(Arc::new(CountingFactory(2, vec![7, 8]))),
        ..request(prompts()[2].clone(), 20, SamplingParams::default(), 5)
    };
    let g = generate(w.clone(), vec![two], None).unwrap().remove(0);
    assert_eq!(g.token_ids.len(), 3);
    assert!([7, 8].contains(&g.token_ids[2]));
    let full = score(
        &w.model,
        &[ScoreRequest::new(g.prompt_ids.clone(), g.token_ids.clone())],
        &ScoreOptions::default(),
    )
    .unwrap()
    .remove(0);
    // The recorded logprob is above the unconstrained one: the other tokens' mass is gone.
    assert!(
        g.logprobs[2] > full.logprobs[2],
        "{} vs {}",
        g.logprobs[2],
        full.logprobs[2]
    );
    assert!(g.logprobs[2] <= 0.0);
}

#[test]
fn a_grammar_that_cannot_go_on_ends_the_sequence_and_says_why() {
    // The grammar ends with token 3, which is no stop token of the request: the sequence goes
    // on past the grammar's end, where nothing is allowed.
    let w = tiny_weights(12);
    let req = GenerateRequest {
        constraint: Some(Arc::new(CountingFactory(2, vec![3]))),
        ..request(prompts()[0].clone(), 20, sampled(), 3)
    };
    let g = generate(w, vec![req], None).unwrap().remove(0);
    assert_eq!(g.token_ids, [0, 1, 3]);
    assert_eq!(g.finish_reason, FinishReason::Stop);
    match g.stop {
        Some(StopMatch::Grammar(e)) => assert!(e.contains("no token"), "{e}"),
        other => panic!("{other:?}"),
    }
}

/// Generates `reqs` in one batch, request `i` served with `adapters[i]`.
fn with_adapters(
    w: &Arc<openclaw_engine::Versioned<openclaw_engine::Model<B>>>,
    reqs: Vec<GenerateRequest>,
    adapters: Vec<Option<Arc<ServedAdapter<B>>>>,
) -> Vec<Generation> {
    let mut batch = DecodeBatch::with_adapters(w.clone(), reqs, adapters, None, None).unwrap();
    while !batch.is_finished() {
        batch.step();
    }
    batch.into_generations()
}

fn adapter(
    w: &Arc<openclaw_engine::Versioned<openclaw_engine::Model<B>>>,
    name: &str,
    seed: u64,
) -> Arc<ServedAdapter<B>> {
    let cfg = LoraConfig {
        rank: 8,
        ..LoraConfig::default()
    };
    Arc::new(ServedAdapter {
        name: name.into(),
        version: 1,
        weights: AdapterWeights::random(&w.model, &cfg, seed, 0.2).unwrap(),
    })
}

/// Requests of three adapters and of the base alone, decoded in one batch, sample what each
/// samples alone with its adapter; and the adapters do change what is sampled.
#[test]
fn requests_of_several_adapters_in_one_batch_generate_what_each_does_alone() {
    let w = tiny_weights(11);
    let adapters = [
        adapter(&w, "a", 1),
        adapter(&w, "b", 2),
        adapter(&w, "c", 3),
    ];
    let mut all = prompts();
    all.push(vec![8, 6, 7, 5, 3, 0, 9]);
    let reqs: Vec<_> = all
        .into_iter()
        .enumerate()
        .map(|(i, p)| request(p, 14, sampled(), 40 + i as u64))
        .collect();
    let taken = vec![
        Some(adapters[0].clone()),
        None,
        Some(adapters[2].clone()),
        Some(adapters[1].clone()),
    ];
    let together = with_adapters(&w, reqs.clone(), taken.clone());
    for (i, (r, a)) in reqs.iter().zip(&taken).enumerate() {
        let alone = with_adapters(&w, vec![r.clone()], vec![a.clone()]).remove(0);
        assert_eq!(alone.token_ids, together[i].token_ids, "request {i}");
        for (x, y) in alone.logprobs.iter().zip(&together[i].logprobs) {
            assert!((x - y).abs() < 1e-5, "request {i}: {x} vs {y}");
        }
    }
    let base = generate(w.clone(), reqs.clone(), None).unwrap();
    assert_eq!(
        base[1].token_ids, together[1].token_ids,
        "no adapter: the base"
    );
    assert!(
        [0, 2, 3]
            .iter()
            .any(|&i| base[i].token_ids != together[i].token_ids),
        "the adapters change what is sampled"
    );
    // A base with adapters of its own cannot serve others'.
    let cfg = LoraConfig::default();
    let own = openclaw_engine::lora::attach(w.model.clone(), &cfg, 1).unwrap();
    let own = Arc::new(openclaw_engine::Versioned {
        version: 0,
        model: own,
    });
    let e = DecodeBatch::with_adapters(own, reqs[..1].to_vec(), vec![taken[0].clone()], None, None)
        .unwrap_err();
    assert!(e.to_string().contains("base without adapters"), "{e}");
}

/// Through the prefix cache, a prompt prefilled under one adapter is not reused by another
/// or by the base, and each still samples what it samples without the cache.
#[test]
fn the_prefix_cache_keeps_each_adapters_prompts_apart() {
    let w = tiny_weights(12);
    let a = adapter(&w, "a", 4);
    let mut cache = PrefixCache::<B>::new(PrefixCacheOptions {
        budget_bytes: 1 << 24,
        min_tokens: 2,
    });
    let prompt: Vec<u32> = (1..40).collect();
    let req = request(prompt, 8, SamplingParams::greedy(), 0);
    let run = |adapter: Option<Arc<ServedAdapter<B>>>, cache: &mut PrefixCache<B>| {
        let mut batch = DecodeBatch::with_adapters(
            w.clone(),
            vec![req.clone()],
            vec![adapter],
            None,
            Some(cache),
        )
        .unwrap();
        while !batch.is_finished() {
            batch.step();
        }
        batch.into_generations().remove(0).token_ids
    };
    let cold_a = with_adapters(&w, vec![req.clone()], vec![Some(a.clone())]).remove(0);
    let cold_base = generate(w.clone(), vec![req.clone()], None)
        .unwrap()
        .remove(0);
    assert_eq!(run(Some(a.clone()), &mut cache), cold_a.token_ids);
    assert_eq!(cache.stats().hits, 0);
    assert_eq!(
        run(None, &mut cache),
        cold_base.token_ids,
        "the base reuses nothing of a's"
    );
    assert_eq!(cache.stats().hits, 0);
    assert_eq!(run(Some(a), &mut cache), cold_a.token_ids);
    assert_eq!(cache.stats().hits, 1, "a reuses its own");
}
