#!/usr/bin/env python3
"""The engine benchmark's workload measured with transformers, for comparison with
`cargo run --release -p openclaw-engine --example bench` (src/bench.rs).

Needs: pip install torch transformers
Same model (random Qwen3: vocab 4096, hidden 256, intermediate 768, 4 layers, 8 q / 4 kv heads of
32, tied embeddings), 2 threads, f32, best of 10 timed runs after one warm-up (as `bench engine`):
  prefill: one 256-token prompt, logits of the last position only
  decode:  16-token prompts, 64 new tokens, full-vocabulary sampling at temperature 1, batch 1 and 8
  score:   8 sequences of 16 + 64 tokens, logprob of every response token
Prints one JSON object.
"""

import json
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

THREADS = 2
PROMPT, NEW, PREFILL, SCORE_BATCH, REPEATS = 16, 64, 256, 8, 10


def best_of(fn):
    fn()
    best = float("inf")
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main():
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=32,
        tie_word_embeddings=True,
        max_position_embeddings=2048,
    )
    model = Qwen3ForCausalLM(cfg).float().eval()
    params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(1)

    def ids(b, n):
        return torch.randint(0, cfg.vocab_size, (b, n), generator=gen)

    out = {"params": params, "threads": THREADS, "torch": torch.__version__}
    with torch.no_grad():
        long = ids(1, PREFILL)
        t = best_of(lambda: model(long, logits_to_keep=1))
        out["prefill_tok_s"] = PREFILL / t

        decode = []
        for b in (1, 8):
            prompt = ids(b, PROMPT)
            mask = torch.ones_like(prompt)

            def run():
                model.generate(
                    prompt,
                    attention_mask=mask,
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=NEW,
                    min_new_tokens=NEW,
                    pad_token_id=0,
                )

            decode.append([b, b * NEW / best_of(run)])
        out["decode_tok_s"] = decode

        seqs = ids(SCORE_BATCH, PROMPT + NEW)

        def score():
            logits = model(seqs).logits[:, PROMPT - 1 : -1].float()
            lp = torch.log_softmax(logits, -1)
            return lp.gather(-1, seqs[:, PROMPT:, None])

        out["score_tok_s"] = SCORE_BATCH * (PROMPT + NEW) / best_of(score)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
