#!/usr/bin/env bash
# The body of the environments' launch scripts (envs/*/run_*_rl.sh), which source it after
# setting ENV_DIR, RUN_NAME, MAX_STEPS and the environment's own defaults: ENV_MAX_TOKENS (tokens
# of one agent turn) and ENV_EVAL_TASKS (held-out tasks of one evaluation). See either for the
# variables; a flag group set in the environment replaces its default here whole.
set -euo pipefail
: "${ENV_DIR:?set by the launch script}"
ROOT="$(cd "$ENV_DIR/../.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
export ENV_TYPE="${ENV_TYPE:-$ENV_DIR}"
export MAX_STEPS
export PARALLEL_ENVS="${PARALLEL_ENVS:-8}"
export CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-$ROOT/checkpoints/$RUN_NAME}"
: "${MODEL_PATH:?set MODEL_PATH to the policy model (HF directory, checkpoint or GGUF)}"
export MODEL_PATH
for v in ENV_CONFIG TOOLS_CONFIG DATA_PATH SWE_BENCH_PATH SCREENSHOT_BACKEND; do
  if [[ -n "${!v:-}" ]]; then export "${v?}"; fi
done
CKPT_ARGS="${CKPT_ARGS:---save-interval 20 --keep-checkpoints 3}"
ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-batch-size 32 --num-rollouts-per-prompt 8 --max-staleness 2 --default-max-tokens $ENV_MAX_TOKENS}"
OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-4 --lr-schedule constant --weight-decay 0 --adam-beta2 0.95 --max-grad-norm 1.0}"
LORA_ARGS="${LORA_ARGS:-}"
EVAL_ARGS="${EVAL_ARGS:---env-eval-interval 5 --env-eval-tasks $ENV_EVAL_TASKS}"

if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host)
fi
# shellcheck disable=SC2086 # the groups are word lists
exec "$BIN" run --plugin "$ROOT/methods/binary-rl" $CKPT_ARGS $ROLLOUT_ARGS $OPTIMIZER_ARGS \
  $LORA_ARGS $EVAL_ARGS "$@"
