#!/usr/bin/env bash
# Decode speed of openclaw-host against llama.cpp on one GGUF file, same threads, same work:
# random 32-token prompts, 64 tokens per sequence sampled at temperature 1, batch 1 and 8,
# run back to back. Usage:
#   host/engine/bench/compare_llama_cpp.sh [python] [model.gguf]
# python: an interpreter with llama-cpp-python (default python3); model: default the
# SmolLM2 file of scripts/fetch-smollm2.sh. Threads: RAYON_NUM_THREADS, else every core.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${1:-python3}
MODEL=${2:-.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
THREADS=${RAYON_NUM_THREADS:-$(nproc)}
export RAYON_NUM_THREADS=$THREADS
[ -f "$MODEL" ] || { echo "no model at $MODEL (run scripts/fetch-smollm2.sh)" >&2; exit 1; }
cargo build --release -p openclaw-host --quiet
ours=$(./target/release/openclaw-host bench decode --model-path "$MODEL" --batches 1,8 2>/dev/null)
theirs=$("$PY" host/engine/bench/llama_cpp_decode.py "$MODEL" --batches 1,8 --threads "$THREADS" 2>/dev/null)
"$PY" - "$ours" "$theirs" "$THREADS" <<'PYEOF'
import json, sys
ours, theirs, threads = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
lc = {r["batch"]: r["decode_tok_s"] for r in theirs}
print(f"decode tokens/s, {threads} threads")
print(f"{'batch':>5} {'groups':>6} {'openclaw':>9} {'llama.cpp':>10} {'ratio':>6}")
for r in ours:
    b = r["batch"]
    print(f"{b:>5} {r['groups']:>6} {r['decode_tok_s']:>9.1f} {lc[b]:>10.1f} {r['decode_tok_s'] / lc[b]:>6.2f}")
# The goals: batch 1 at least llama.cpp's, batch 8 at least twice llama.cpp's batch 8.
for b, goal in [(1, 1.0), (8, 2.0)]:
    if b in lc and any(r["batch"] == b for r in ours):
        best = max(r["decode_tok_s"] for r in ours if r["batch"] == b)
        ratio = best / lc[b]
        print(f"goal: batch {b} at least {goal:.0f}x llama.cpp: {ratio:.2f}x ({'met' if ratio >= goal else 'not met'})")
PYEOF
