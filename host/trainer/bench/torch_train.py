"""PyTorch reference for `openclaw-host bench train`: the same Qwen3 shapes and the same work
per step (forward, shifted cross-entropy, backward, AdamW lr 1e-4, no clipping) on random
tokens, 2 threads. Prints one JSON object: every configuration's step times and tokens/s, and
the peak resident memory.

    python host/trainer/bench/torch_train.py [iters]   (timed steps per configuration, default 20)

Needs torch and transformers (`pip install torch transformers`); `compare.sh` runs both sides.
"""

import json
import resource
import sys
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

# name: (vocab, hidden, intermediate, layers, heads, kv heads, head dim, batch, seq), as in
# host/cli/src/lib.rs `bench_train`.
CONFIGS = {
    "tiny-1M": (2048, 128, 384, 4, 4, 2, 32, 32, 64),
    "bench-4L-256": (4096, 256, 768, 4, 8, 4, 32, 8, 256),
}


def bench(name: str, iters: int) -> dict:
    vocab, hidden, inter, layers, heads, kv, hd, batch, seq = CONFIGS[name]
    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=hd,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
    )
    model = Qwen3ForCausalLM(cfg).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab, (batch, seq))

    def step() -> None:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    tokens = batch * seq
    return {
        "config": name,
        "batch": batch,
        "seq": seq,
        "step_ms": times,
        "best_tokens_per_s": tokens / min(times) * 1e3,
        "mean_tokens_per_s": tokens / (sum(times) / len(times)) * 1e3,
    }


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    if iters < 1:
        sys.exit(f"torch_train.py: timed steps must be at least 1 (got {iters})")
    torch.set_num_threads(2)
    runs = [bench(name, iters) for name in CONFIGS]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"runs": runs, "peak_rss_mib": peak}))


if __name__ == "__main__":
    main()
