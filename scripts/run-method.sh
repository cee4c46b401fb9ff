#!/usr/bin/env bash
# The body of the methods' launch scripts (methods/*/run_qwen3_7b*.sh): they set METHOD_DIR,
# RUN_NAME and the default flag groups, then run this. See any of them for the variables.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
: "${METHOD_DIR:?set by the launch script}"
: "${MODEL_PATH:?set MODEL_PATH to the model directory}"
export MODEL_PATH
export CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-$ROOT/checkpoints/$RUN_NAME}"
JUDGE_ARGS=()
if [[ -n "${JUDGE_ENDPOINT:-}" ]]; then JUDGE_ARGS+=(--judge-endpoint "$JUDGE_ENDPOINT"); fi

if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host)
fi
if [[ -n "${DATA_PATH:-}" ]]; then
  # shellcheck disable=SC2086 # the groups are word lists
  exec "$BIN" train --plugin "$METHOD_DIR" --data-path "$DATA_PATH" $CKPT_ARGS $OPTIMIZER_ARGS \
    $LORA_ARGS --rollout-batch-size 16 "${JUDGE_ARGS[@]}" "$@"
fi
# shellcheck disable=SC2086
exec "$BIN" run --plugin "$METHOD_DIR" $CKPT_ARGS $ROLLOUT_ARGS $OPTIMIZER_ARGS $LORA_ARGS \
  "${JUDGE_ARGS[@]}" "$@"
