#!/usr/bin/env bash
# Every speed comparison the README quotes, back to back on this machine, then one table of
# ratios (ours / anchor; above 1 is faster) with the CPU and its SIMD features:
#   training      `openclaw-host bench train`   vs PyTorch       (host/trainer/bench/torch_train.py)
#   prefill, decode, scoring of a random 4.2M Qwen3
#                 `openclaw-host bench engine`  vs transformers  (host/engine/bench/torch_engine.py)
#   SmolLM2-135M Q4_1 decode, batch 1 and 8, the weights in their blocks and dequantised to f32
#                 `openclaw-host bench decode`  vs llama.cpp     (host/engine/bench/llama_cpp_decode.py)
#
# Usage: [STEPS=20] [ROUNDS=3] scripts/bench-all.sh [python]
#   python: an interpreter with torch, transformers and llama-cpp-python (default python3), e.g.
#   python3 -m venv /tmp/bench && /tmp/bench/bin/pip install torch transformers llama-cpp-python
#   STEPS: timed training steps per shape on each side; ROUNDS: alternating runs of the engine
#   comparison and of SmolLM2's decode in blocks against llama.cpp, each side keeping its best
#   figure.
# Threads: two on every side (the PyTorch and transformers scripts use two; RAYON_NUM_THREADS
# changes ours and llama.cpp's). The raw JSON of each run is kept in target/bench-all/. Takes
# about 5 minutes on 2 cores after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-python3}
THREADS=${RAYON_NUM_THREADS:-2}
STEPS=${STEPS:-20} # timed training steps per shape on each side
ROUNDS=${ROUNDS:-3} # alternating runs of the engine and SmolLM2 comparisons (each side's best counts)
if ! [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]]; then
    echo "bench-all: ROUNDS must be a whole number of at least 1 (got ROUNDS=$ROUNDS)" >&2
    exit 1
fi
export RAYON_NUM_THREADS=$THREADS
MODEL=.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=target/bench-all

if ! "$PY" -c 'import torch, transformers, llama_cpp' 2>/dev/null; then
    echo "bench-all: $PY cannot import torch, transformers and llama_cpp;" \
        "install them with: $PY -m pip install torch transformers llama-cpp-python" >&2
    exit 1
fi
[ -f "$MODEL" ] || bash scripts/fetch-smollm2.sh
cargo build --release -p openclaw-host --quiet
mkdir -p "$OUT"
# The rounds' files (and the single-run names an older version of this script wrote) go first: a
# run with fewer ROUNDS must not read a previous run's figures or peak memory.
rm -f "$OUT"/{engine,torch_engine,decode_blocks,llama_cpp}-*.{json,log} \
    "$OUT"/decode_blocks.{json,log} "$OUT"/llama_cpp.{json,log}
BIN=./target/release/openclaw-host

step() { echo "bench-all: $*" >&2; }
# logged NAME CMD...: CMD's output into $OUT/NAME.json and its messages into $OUT/NAME.log; if it
# fails, the end of that log is shown, so the reason is not left in a file.
logged() {
    local name=$1
    shift
    if ! "$@" > "$OUT/$name.json" 2> "$OUT/$name.log"; then
        echo "bench-all: \`$*\` failed; the end of $OUT/$name.log:" >&2
        tail -n 20 "$OUT/$name.log" >&2
        exit 1
    fi
}
step "training (openclaw-host, then PyTorch)"
"$BIN" bench train --steps "$STEPS" > "$OUT/train.json" # stderr: progress, or why STEPS is refused
"$PY" host/trainer/bench/torch_train.py "$STEPS" > "$OUT/torch_train.json"
# The engine's measurements take milliseconds each, so a few seconds of a slow phase of the
# machine can decide them: both sides run ROUNDS times, alternating, and each keeps its best.
for round in $(seq 1 "$ROUNDS"); do
    step "prefill, decode, scoring (openclaw-host, then transformers), round $round of $ROUNDS"
    logged "engine-$round" "$BIN" bench engine
    "$PY" host/engine/bench/torch_engine.py > "$OUT/torch_engine-$round.json"
done
# SmolLM2's decode the same way: a step of batch 1 takes about 5 ms, so a slow moment of the
# machine can halve one run's figure; ours with blocks and llama.cpp alternate ROUNDS times and
# each keeps its best. The f32 weights, the slow form kept for comparison, run once.
for round in $(seq 1 "$ROUNDS"); do
    step "SmolLM2 decode (openclaw-host with blocks, then llama.cpp), round $round of $ROUNDS"
    logged "decode_blocks-$round" "$BIN" bench decode --model-path "$MODEL" --batches 1,8 --weights blocks
    logged "llama_cpp-$round" "$PY" host/engine/bench/llama_cpp_decode.py "$MODEL" --batches 1,8 --threads "$THREADS"
done
step "SmolLM2 decode with the weights dequantised to f32 (openclaw-host)"
logged decode_f32 "$BIN" bench decode --model-path "$MODEL" --batches 1,8 --weights f32

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
features=$(grep -m1 -o -w -E 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ' || true)
"$PY" - "$OUT" "$cpu" "$features" "$THREADS" <<'PYEOF'
import glob, json, re, sys
out, cpu, features, threads = sys.argv[1:5]
load = lambda name: json.load(open(f"{out}/{name}.json"))
rows = []
def row(work, ours, theirs, anchor, unit="tok/s"):
    rows.append((work, ours, theirs, anchor, ours / theirs, unit))

train, torch_train = load("train"), [json.loads(l) for l in open(f"{out}/torch_train.json")]
t = {}
for r in torch_train:
    for run in r.get("runs", [r]):
        t[run["config"]] = run
for r in train["runs"]:
    row(f"train {r['config']} ({r['batch']}x{r['seq']})", r["result"]["mean_tokens_per_s"],
        t[r["config"]]["mean_tokens_per_s"], "PyTorch")
def best_of_rounds(prefix):
    runs = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{prefix}-*.json"))]
    best = dict(runs[0])
    for r in runs[1:]:
        for key in ("prefill_tok_s", "score_tok_s"):
            best[key] = max(best[key], r[key])
        d = dict((b, v) for b, v in best["decode_tok_s"])
        for b, v in r["decode_tok_s"]:
            d[b] = max(d[b], v)
        best["decode_tok_s"] = sorted(d.items())
    return best, len(runs)
ours, rounds = best_of_rounds("engine")
theirs, _ = best_of_rounds("torch_engine")
row("prefill, 4.2M Qwen3, 256 tokens", ours["prefill_tok_s"], theirs["prefill_tok_s"], "transformers")
td = dict((b, v) for b, v in theirs["decode_tok_s"])
for b, v in ours["decode_tok_s"]:
    row(f"decode, 4.2M Qwen3, batch {b}", v, td[b], "transformers")
row("scoring, 4.2M Qwen3, 8 x 80 tokens", ours["score_tok_s"], theirs["score_tok_s"], "transformers")
def best_decode(prefix, key):
    """Each (batch, groups)'s best tokens/s over the rounds' runs of `prefix`."""
    best = {}
    for p in sorted(glob.glob(f"{out}/{prefix}-*.json")):
        for r in json.load(open(p)):
            k = key(r)
            if k not in best or r["decode_tok_s"] > best[k]["decode_tok_s"]:
                best[k] = r
    return [best[k] for k in sorted(best)]
lc = {r["batch"]: r["decode_tok_s"] for r in best_decode("llama_cpp", lambda r: r["batch"])}
decode = {"blocks": best_decode("decode_blocks", lambda r: (r["batch"], r["groups"])),
          "f32": load("decode_f32")}
for form in ("blocks", "f32"):
    for r in decode[form]:
        if r["groups"] == 1:
            row(f"SmolLM2 Q4_1 decode, batch {r['batch']}, {form}", r["decode_tok_s"], lc[r["batch"]], "llama.cpp")
def peak_mib(logs):
    found = [int(m.group(1)) for log in logs
             for m in [re.search(r"peak resident memory (\d+) MiB", open(log).read())] if m]
    return str(max(found)) if found else "?"
peak = {"blocks": peak_mib(sorted(glob.glob(f"{out}/decode_blocks-*.log"))),
        "f32": peak_mib([f"{out}/decode_f32.log"])}

print(f"CPU: {cpu}; features: {features.strip()}; {threads} threads; "
      f"engine and SmolLM2 blocks rows: each side's best of {rounds} alternating rounds")
print(f"| work | openclaw-host | anchor | anchor's | ratio |")
print(f"|---|---|---|---|---|")
for work, a, b, anchor, ratio, unit in rows:
    print(f"| {work} | {a:,.0f} {unit} | {anchor} | {b:,.0f} | {ratio:.2f} |")
print(f"peak memory, training bench: openclaw-host {train['peak_rss_mib']:.0f} MiB, "
      f"PyTorch {torch_train[-1].get('peak_rss_mib', float('nan')):.0f} MiB")
print(f"peak memory, SmolLM2 decode bench: blocks {peak['blocks']} MiB, f32 {peak['f32']} MiB")
PYEOF
