"""PyTorch reference for openclaw-train's bench: the same tiny Qwen3 and the same work per step
(forward, shifted cross-entropy over 255 targets per row, backward, AdamW with torch defaults
and lr 1e-4, no clipping) on 8 x 256 random tokens, 2 threads.

    /work/venv-ref/bin/python host/train/bench/torch_train.py [iters]
"""

import json
import sys
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    torch.set_num_threads(2)
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
        max_position_embeddings=4096,
    )
    model = Qwen3ForCausalLM(cfg).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch, seq = 8, 256
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))

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
    best = min(times)
    mean = sum(times) / len(times)
    print(json.dumps({"step_ms": times, "best_tokens_per_s": tokens / best * 1e3,
                      "mean_tokens_per_s": tokens / mean * 1e3}))
    print(f"torch train {batch}x{seq}: best {tokens / best * 1e3:.0f} tok/s, "
          f"mean {tokens / mean * 1e3:.0f} tok/s")


if __name__ == "__main__":
    main()
