#!/usr/bin/env bash
# Training throughput of openclaw-host against PyTorch on this machine, same shapes, same
# work per step, run back to back. Usage: host/trainer/bench/compare.sh [python]
# (python: an interpreter with torch and transformers; default python3). STEPS (default 20):
# timed steps per shape on each side, after one warm-up step.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY=${1:-python3}
STEPS=${STEPS:-20}
cargo build --release -p openclaw-host --quiet
# Its progress lines and any refusal (of a bad STEPS, say) go to stderr, left on the terminal.
ours=$(./target/release/openclaw-host bench train --steps "$STEPS")
theirs=$("$PY" host/trainer/bench/torch_train.py "$STEPS")
"$PY" - "$ours" "$theirs" <<'PYEOF'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
t = {r["config"]: r for r in theirs["runs"]}
print(f"{'config':<14} {'openclaw tok/s':>15} {'torch tok/s':>12} {'ratio':>6}")
for r in ours["runs"]:
    a, b = r["result"]["mean_tokens_per_s"], t[r["config"]]["mean_tokens_per_s"]
    print(f"{r['config']:<14} {a:>15.0f} {b:>12.0f} {a / b:>6.2f}")
print(f"peak RSS: openclaw {ours['peak_rss_mib']:.0f} MiB, torch {theirs['peak_rss_mib']:.0f} MiB")
PYEOF
