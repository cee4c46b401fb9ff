#!/usr/bin/env python3
"""llama.cpp's decode speed on a GGUF file, measured the way `openclaw-host bench decode` measures
the engine: random prompts of --prompt-len tokens, then --new-tokens tokens per sequence sampled
at temperature 1 from the full vocabulary with no stops, at each batch size (one llama_batch
holding one token of every sequence per step). The prefill is timed apart; the best of
--repeats runs after a warm-up counts. Prints one JSON list like the engine's.

Setup: python3 -m venv target/llama-ref && CMAKE_ARGS="$LLAMA_CMAKE_ARGS" \
    target/llama-ref/bin/pip install llama-cpp-python
(builds llama.cpp from source, CPU only). On CPUs that report AMX but whose kernel does not
grant it to processes (some VMs), the default native build crashes in ggml's AMX matmul; build
with LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
-DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON" (AVX-512 without
AMX).
"""

import argparse
import ctypes
import json
import random
import sys
import time

import llama_cpp as L


def main():
    p = argparse.ArgumentParser()
    p.add_argument("gguf")
    p.add_argument("--batches", default="1,8")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, required=True)
    a = p.parse_args()
    batches = [int(b) for b in a.batches.split(",")]

    # llama.cpp logs every load step on stderr; keep errors only.
    quiet = L.llama_log_callback(lambda level, text, user: None)
    L.llama_log_set(quiet, ctypes.c_void_p())
    L.llama_backend_init()
    mparams = L.llama_model_default_params()
    model = L.llama_model_load_from_file(a.gguf.encode(), mparams)
    if not model:
        sys.exit(f"llama.cpp cannot load {a.gguf}")
    vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    cparams = L.llama_context_default_params()
    cparams.n_ctx = max(batches) * (a.prompt_len + a.new_tokens + 8)
    cparams.n_batch = max(batches) * a.prompt_len
    cparams.n_ubatch = cparams.n_batch
    cparams.n_seq_max = max(batches)
    cparams.n_threads = a.threads
    cparams.n_threads_batch = a.threads
    ctx = L.llama_init_from_model(model, cparams)
    if not ctx:
        sys.exit("llama.cpp cannot create a context")
    mem = L.llama_get_memory(ctx)
    rng = random.Random(0)
    batch = L.llama_batch_init(cparams.n_batch, 0, max(batches))

    def fill(entries):
        """entries: (token, pos, seq, wants_logits)"""
        batch.n_tokens = len(entries)
        for i, (tok, pos, seq, logits) in enumerate(entries):
            batch.token[i] = tok
            batch.pos[i] = pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq
            batch.logits[i] = 1 if logits else 0

    def run(b, prompts, seed):
        L.llama_memory_clear(mem, True)
        samplers = []
        for s in range(b):
            chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
            L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(seed + s))
            samplers.append(chain)
        t = time.perf_counter()
        fill([(tok, j, s, j == a.prompt_len - 1)
              for s in range(b) for j, tok in enumerate(prompts[s])])
        if L.llama_decode(ctx, batch) != 0:
            sys.exit("llama_decode failed on the prefill")
        # Output rows of the prefill: the last token of each sequence, in batch order.
        rows = [(s + 1) * a.prompt_len - 1 for s in range(b)]
        prefill = time.perf_counter() - t
        t = time.perf_counter()
        for step in range(a.new_tokens):
            toks = [L.llama_sampler_sample(samplers[s], ctx, rows[s]) for s in range(b)]
            if step == a.new_tokens - 1:
                break  # the last sampled token needs no forward pass (as in the engine)
            fill([(toks[s], a.prompt_len + step, s, True) for s in range(b)])
            if L.llama_decode(ctx, batch) != 0:
                sys.exit("llama_decode failed")
            rows = list(range(b))
        decode = time.perf_counter() - t
        for smp in samplers:
            L.llama_sampler_free(smp)
        return prefill, decode

    out = []
    for b in batches:
        prompts = [[rng.randrange(vocab) for _ in range(a.prompt_len)] for _ in range(b)]
        best = None
        for rep in range(a.repeats + 1):
            prefill, decode = run(b, prompts, 100 * rep)
            if rep > 0 and (best is None or decode < best[1]):
                best = (prefill, decode)
        tok_s = b * a.new_tokens / best[1]
        print(f"llama.cpp batch {b:>2}: {tok_s:7.1f} tokens/s decode "
              f"({tok_s / b:.1f} per sequence), prefill {best[0]:.2f} s", file=sys.stderr)
        out.append({"batch": b, "threads": a.threads, "prefill_s": best[0],
                    "decode_tok_s": tok_s, "per_sequence_tok_s": tok_s / b})
    L.llama_batch_free(batch)
    L.llama_free(ctx)
    L.llama_model_free(model)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
