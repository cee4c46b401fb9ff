#!/usr/bin/env bash
# The body of the methods' launch scripts (methods/*/run_qwen3_7b*.sh), which source it after
# setting METHOD_DIR, RUN_NAME, METHOD_LORA (1: LoRA adapters, 0: full fine-tuning) and
# METHOD_ROLLOUT_ARGS (the method's judge flags, the end of the default ROLLOUT_ARGS). See any of
# them for the variables; a flag group set in the environment replaces its default here whole.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
: "${METHOD_DIR:?set by the launch script}"
: "${MODEL_PATH:?set MODEL_PATH to the model directory}"
export MODEL_PATH METHOD_DIR RUN_NAME
export CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-$ROOT/checkpoints/$RUN_NAME}"
# The original's full and LoRA scripts differ in the save interval, the learning rate and the
# adapter flags.
if [[ "${METHOD_LORA:?set by the launch script}" == 1 ]]; then
  save_interval=1 lr=1e-4
  lora="--use-lora --lora-rank 16 --lora-alpha 32 --lora-dropout 0 --lora-target-modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
else
  save_interval=100 lr=1e-5 lora=""
fi
export CKPT_ARGS="${CKPT_ARGS:---save-interval $save_interval --keep-checkpoints 3 --resume-from-checkpoint latest}"
export ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-batch-size 16 --num-rollouts-per-prompt 1 --max-staleness 2 --default-max-tokens 8192 $METHOD_ROLLOUT_ARGS}"
export OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr $lr --lr-schedule constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98 --max-grad-norm 1.0}"
export LORA_ARGS="${LORA_ARGS:-$lora}"
JUDGE_ARGS=()
if [[ -n "${JUDGE_ENDPOINT:-}" ]]; then JUDGE_ARGS+=(--judge-endpoint "$JUDGE_ENDPOINT"); fi

if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host)
fi
if [[ -n "${DATA_PATH:-}" ]]; then
  # shellcheck disable=SC2086 # the groups are word lists
  # Every flag group in every mode: offline training reads the batch size and the judge's
  # flags from ROLLOUT_ARGS as a live run does.
  exec "$BIN" train --plugin "$METHOD_DIR" --data-path "$DATA_PATH" $CKPT_ARGS $ROLLOUT_ARGS \
    $OPTIMIZER_ARGS $LORA_ARGS "${JUDGE_ARGS[@]}" "$@"
fi
# shellcheck disable=SC2086
exec "$BIN" run --plugin "$METHOD_DIR" $CKPT_ARGS $ROLLOUT_ARGS $OPTIMIZER_ARGS $LORA_ARGS \
  "${JUDGE_ARGS[@]}" "$@"
