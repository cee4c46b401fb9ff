//! The CUDA backend on a real GPU, one operation at a time: each step reads its result back (so
//! an asynchronous launch error surfaces at the step that caused it), compares attention and
//! greedy decoding with the CPU backend and the fixture's logits with transformers, and the test
//! fails naming every step that failed. Built only with the `cuda`
//! feature; without a GPU it prints that it skipped.
//!
//! `cargo test --release -p openclaw-engine --features cuda --test cuda -- --nocapture`
#![cfg(feature = "cuda")]

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use burn::prelude::*;
use burn::tensor::module::attention;
use burn::tensor::ops::AttentionModuleOptions;
use common::*;
use openclaw_engine::device::{CudaBackend as Cu, CudaDevice};
use openclaw_engine::{generate, load_model, GenerateRequest, Model, Versioned};

/// Runs `f`, printing whether it finished; `None` (with the panic's message) when it did not.
fn step<T>(failed: &mut Vec<String>, name: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => {
            eprintln!("ok    {name}");
            Some(v)
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let first = msg.lines().take(6).collect::<Vec<_>>().join(" | ");
            eprintln!("FAIL  {name}: {first}");
            failed.push(name.to_string());
            None
        }
    }
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) as f32
                / (1u32 << 24) as f32
                - 0.5
        })
        .collect()
}

fn on<Bk: Backend>(v: &[f32], shape: [usize; 4], dev: &Bk::Device) -> Tensor<Bk, 4> {
    Tensor::from_data(TensorData::new(v.to_vec(), shape), dev)
}

fn mask_on<Bk: Backend>(
    hidden: &[bool],
    shape: [usize; 4],
    dev: &Bk::Device,
) -> Tensor<Bk, 4, Bool> {
    Tensor::from_data(TensorData::new(hidden.to_vec(), shape), dev)
}

/// Reads a fresh tensor back from the GPU: a failed kernel launch is reported at the next read,
/// so a step calls this after its last operation to have the error land in that step.
fn surface_launch_errors(gpu: &CudaDevice) {
    Tensor::<Cu, 1>::zeros([4], gpu).into_data();
}

/// burn's attention on `dev` of backend `Bk` over the inputs, flattened.
fn attention_on<Bk: Backend>(
    dev: &Bk::Device,
    [qv, kv, vv]: [&[f32]; 3],
    [q, k]: [[usize; 4]; 2],
    hidden: Option<&[bool]>,
    opts: AttentionModuleOptions,
) -> Vec<f32> {
    let mshape = [q[0], 1, 1, k[2]];
    attention(
        on::<Bk>(qv, q, dev),
        on::<Bk>(kv, k, dev),
        on::<Bk>(vv, k, dev),
        hidden.map(|h| mask_on::<Bk>(h, mshape, dev)),
        None,
        opts,
    )
    .into_data()
    .to_vec::<f32>()
    .unwrap()
}

/// burn's attention on the GPU and the CPU, with the given mask, causality and scale.
fn attention_agrees(
    q: [usize; 4],
    keys: usize,
    hidden: Option<&[bool]>,
    causal: bool,
    scale: Option<f64>,
) {
    let k = [q[0], q[1], keys, q[3]];
    let (qv, kv, vv) = (
        values(q.iter().product(), 1),
        values(k.iter().product(), 2),
        values(k.iter().product(), 3),
    );
    let opts = AttentionModuleOptions {
        scale,
        softcap: None,
        is_causal: causal,
    };
    let inputs = [qv.as_slice(), kv.as_slice(), vv.as_slice()];
    let got = attention_on::<Cu>(&CudaDevice::default(), inputs, [q, k], hidden, opts);
    let want = attention_on::<B>(&device(), inputs, [q, k], hidden, opts);
    let err = rel_err(&got, &want);
    // CUDA's matmuls take TF32 tensor-core paths (10-bit mantissas).
    assert!(err < 2e-3, "relative error {err}");
}

#[test]
fn the_cuda_backend_runs_every_step_of_serving_as_the_cpu_does() {
    let gpu = CudaDevice::default();
    if catch_unwind(|| Tensor::<Cu, 1>::zeros([1], &CudaDevice::default()).into_data()).is_err() {
        eprintln!("skipping: no usable CUDA device");
        return;
    }
    let mut failed = Vec::new();
    step(&mut failed, "matmul", || {
        let a = Tensor::<Cu, 2>::from_data(TensorData::new(values(6, 1), [2, 3]), &gpu);
        let b = Tensor::<Cu, 2>::from_data(TensorData::new(values(12, 2), [3, 4]), &gpu);
        a.matmul(b).into_data()
    });
    // The decode step's shape: the query heads of a kv head as query rows, a key mask.
    let hidden: Vec<bool> = (0..2 * 7).map(|i| i == 2 || i == 9).collect();
    step(&mut failed, "attention, decode shape, key mask", || {
        attention_agrees([2, 2, 3, 16], 7, Some(&hidden), false, None)
    });
    step(&mut failed, "attention, decode shape, no mask", || {
        attention_agrees([2, 2, 3, 16], 7, None, false, None)
    });
    step(
        &mut failed,
        "attention, decode shape, key mask, naive",
        || attention_agrees([2, 2, 3, 16], 7, Some(&hidden), false, Some(0.25)),
    );
    let hidden5: Vec<bool> = (0..2 * 5).map(|i| i == 0).collect();
    step(&mut failed, "attention, causal prefill, key mask", || {
        attention_agrees([2, 4, 5, 16], 5, Some(&hidden5), true, None)
    });
    step(&mut failed, "attention, causal prefill, no mask", || {
        attention_agrees([2, 4, 5, 16], 5, None, true, None)
    });
    step(&mut failed, "attention, one query one key", || {
        attention_agrees([1, 2, 1, 8], 1, None, false, None)
    });

    for hd in [32, 64] {
        for g in [1, 2, 3] {
            for t in [1, 33, 64, 65, 130, 300] {
                let hidden: Vec<bool> = (0..2 * t).map(|i| i % t == t / 2 && t > 1).collect();
                step(
                    &mut failed,
                    &format!("decode attention hd {hd} g {g} keys {t} mask"),
                    || attention_agrees([2, 2, g, hd], t, Some(&hidden), false, None),
                );
                step(
                    &mut failed,
                    &format!("decode attention hd {hd} g {g} keys {t}"),
                    || attention_agrees([2, 2, g, hd], t, None, false, None),
                );
            }
        }
        for s in [9, 33, 70, 130] {
            let hidden: Vec<bool> = (0..2 * s).map(|i| i == s + s - 1).collect();
            step(
                &mut failed,
                &format!("causal attention hd {hd} len {s} mask"),
                || attention_agrees([2, 4, s, hd], s, Some(&hidden), true, None),
            );
            step(
                &mut failed,
                &format!("causal attention hd {hd} len {s}"),
                || attention_agrees([2, 4, s, hd], s, None, true, None),
            );
        }
    }
    // A prefill that continues cached keys: fewer queries than keys, causal from the bottom
    // right (what a prefix-cache hit runs), burn's fused kernel and its decomposed one.
    for (queries, keys) in [(5, 9), (1, 4), (3, 40)] {
        step(
            &mut failed,
            &format!("causal continuation {queries} of {keys}"),
            || attention_agrees([1, 4, queries, 32], keys, None, true, None),
        );
        step(
            &mut failed,
            &format!("causal continuation {queries} of {keys}, naive"),
            || {
                attention_agrees(
                    [1, 4, queries, 32],
                    keys,
                    None,
                    true,
                    Some(1.0 / 32f64.sqrt()),
                )
            },
        );
    }
    step(&mut failed, "slice a batch row, then cat positions", || {
        let t = on::<Cu>(&values(2 * 2 * 9 * 32, 4), [2, 2, 9, 32], &gpu);
        let row = t.slice([1..2, 0..2, 0..5, 0..32]);
        let new = on::<Cu>(&values(2 * 3 * 32, 5), [1, 2, 3, 32], &gpu);
        Tensor::cat(vec![row, new], 2).into_data()
    });
    // The built-in default's shape, sampled, stops, top logprobs, then a prefix cache.
    let cfg = openclaw_engine::ModelConfig::qwen3(2048, 128, 384, 4, 4, 2, 32, true);
    if let Some(m) = step(&mut failed, "a random built-in-shaped model", || {
        openclaw_engine::random_model::<Cu>(cfg, 3, &gpu).unwrap()
    }) {
        let w = Arc::new(Versioned {
            version: 0,
            model: m,
        });
        let reqs: Vec<GenerateRequest> = (0..12u32)
            .map(|i| {
                let mut r =
                    GenerateRequest::new((0..3 + 3 * i).map(|j| (j * 37 + i) % 2048).collect(), 40);
                r.seed = i as u64;
                r.top_logprobs = 5;
                r.stop_token_ids = vec![3, 17, 99];
                r
            })
            .collect();
        step(&mut failed, "sampled generation, 12 sequences", || {
            let g = generate(w.clone(), reqs.clone(), None).unwrap();
            surface_launch_errors(&gpu);
            eprintln!(
                "      lengths {:?}",
                g.iter().map(|g| g.token_ids.len()).collect::<Vec<_>>()
            );
        });
        step(
            &mut failed,
            "generation with a prefix cache, two turns",
            || {
                use openclaw_engine::generate::prefix_cache::{PrefixCache, PrefixCacheOptions};
                let mut cache = PrefixCache::new(PrefixCacheOptions {
                    budget_bytes: 64 << 20,
                    min_tokens: 4,
                });
                let first = openclaw_engine::DecodeBatch::with_prefix_cache(
                    w.clone(),
                    reqs.clone(),
                    None,
                    Some(&mut cache),
                )
                .unwrap();
                let mut first = first;
                while !first.is_finished() {
                    first.step();
                }
                let gens = first.into_generations();
                let next: Vec<GenerateRequest> = reqs
                    .iter()
                    .zip(&gens)
                    .map(|(r, g)| {
                        let mut n = r.clone();
                        n.prompt.extend(&g.token_ids);
                        n.prompt.extend([5, 6, 7]);
                        n
                    })
                    .collect();
                let mut second = openclaw_engine::DecodeBatch::with_prefix_cache(
                    w.clone(),
                    next,
                    None,
                    Some(&mut cache),
                )
                .unwrap();
                while !second.is_finished() {
                    second.step();
                }
                surface_launch_errors(&gpu);
                assert!(cache.stats().hits > 0, "the second turn reused the first");
                eprintln!(
                    "      second turn lengths {:?}",
                    second
                        .into_generations()
                        .iter()
                        .map(|g| g.token_ids.len())
                        .collect::<Vec<_>>()
                );
            },
        );
    }

    let exp = Expected::load();
    let cpu_model: Model<B> = load_model(&fixture("causal"), &device()).unwrap();
    let model = step(&mut failed, "load the fixture model on the GPU", || {
        load_model::<Cu>(&fixture("causal"), &gpu).unwrap()
    });
    if let Some(model) = model {
        for i in 0..2 {
            let (_, ids) = exp.ids(&format!("causal.ids.{i}"));
            let (_, want) = exp.floats(&format!("causal.logits.{i}"));
            step(
                &mut failed,
                &format!("fixture logits, sequence {i}"),
                || {
                    let t = Tensor::<Cu, 2, Int>::from_data(
                        TensorData::new(
                            ids.iter().map(|&x| x as i64).collect::<Vec<_>>(),
                            [1, ids.len()],
                        ),
                        &gpu,
                    );
                    let got = model
                        .forward(t)
                        .unwrap()
                        .into_data()
                        .to_vec::<f32>()
                        .unwrap();
                    let err = rel_err(&got, &want);
                    eprintln!("      relative error {err:.2e} against transformers");
                    assert!(err < 2e-3, "relative error {err}");
                },
            );
        }
        // Greedy decoding of two prompts of different lengths (padding holes, a key mask).
        let requests: Vec<GenerateRequest> = [vec![1u32, 5, 9, 2], vec![7u32, 3]]
            .into_iter()
            .map(|p| {
                let mut r = GenerateRequest::new(p, 6);
                r.sampling.temperature = 0.0;
                r
            })
            .collect();
        let want = generate(
            Arc::new(Versioned {
                version: 0,
                model: cpu_model,
            }),
            requests.clone(),
            None,
        )
        .unwrap();
        step(&mut failed, "greedy generation of a padded batch", || {
            let got = generate(Arc::new(Versioned { version: 0, model }), requests, None).unwrap();
            surface_launch_errors(&gpu);
            for (g, w) in got.iter().zip(&want) {
                eprintln!("      gpu {:?} cpu {:?}", g.token_ids, w.token_ids);
                assert_eq!(g.token_ids, w.token_ids, "the greedy tokens differ");
            }
        });
    }
    assert!(failed.is_empty(), "failed on the GPU: {failed:?}");
}
