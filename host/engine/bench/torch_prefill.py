#!/usr/bin/env python3
"""Time to first token of a recorded chat request in transformers: the anchor beside
`openclaw_ttft.py`.

Usage: torch_prefill.py MODEL_DIR REQUESTS_JSON [THREADS]

Renders the first request of REQUESTS_JSON (messages and tools) with the model's chat template,
tokenizes it and runs one forward pass that computes the logits of the last position only
(what a first token needs), on THREADS threads (default 2). Prints one JSON line: the prompt's
token count and the best of three timed runs after a warm-up, template and tokenizer included.
"""
import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    model_dir, path = sys.argv[1], sys.argv[2]
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    torch.set_num_threads(threads)
    request = json.load(open(path))["requests"][0]
    # Text parts joined as the server joins them (chat templates expect string content).
    for m in request["messages"]:
        if isinstance(m.get("content"), list):
            m["content"] = "\n".join(p.get("text", "") for p in m["content"])
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()

    def first_token():
        ids = tok.apply_chat_template(
            request["messages"], tools=request.get("tools"), add_generation_prompt=True,
            return_tensors="pt")
        if not torch.is_tensor(ids):  # transformers 5 returns the whole encoding
            ids = ids["input_ids"]
        with torch.inference_mode():
            out = model(ids, logits_to_keep=1)
        return ids.shape[1], int(out.logits[0, -1].argmax())

    first_token()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        n, _ = first_token()
        best = min(best, time.perf_counter() - t)
    print(json.dumps({"prompt_tokens": n, "seconds": best, "threads": threads,
                      "torch": torch.__version__,
                      "attention": model.config._attn_implementation}))


if __name__ == "__main__":
    main()
