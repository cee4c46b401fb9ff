#!/usr/bin/env bash
# GRPO on the tool-call environment (envs/toolcall): groups of episodes per problem, the
# code_interpreter tool run in the sandbox, the last boxed answer scored ±1 after the loop, one
# sample per agent step with its episode's group-normalised advantage, trained in the
# background while the policy keeps serving.
# A thin wrapper over `openclaw-host run --env`: every variable below can be set; anything after
# the script's name is passed on (it wins over the groups).
#
#   MODEL_PATH        the policy (HF directory, checkpoint or GGUF); required
#   ENV_TYPE          the environment: a crate directory, a library or a name under envs/ (toolcall)
#   ENV_CONFIG        the environment's configuration (default: envs/toolcall/config.toml)
#   TOOLS_CONFIG      the tools and their limits: a TOML file of [tools.code_interpreter] tables
#   DATA_PATH         a task file (JSONL of {question, answer}, GSM8K's layout too); default: the
#                     environment's own problems
#   MAX_STEPS         agent steps per episode before it is cut off (still scored)
#   PARALLEL_ENVS     episodes running at once
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/toolcall-rl)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS   flag groups (defaults below)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$ENV_DIR/../.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
export ENV_TYPE="${ENV_TYPE:-$ENV_DIR}"
export MAX_STEPS="${MAX_STEPS:-4}"
export PARALLEL_ENVS="${PARALLEL_ENVS:-8}"
export CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-$ROOT/checkpoints/toolcall-rl}"
: "${MODEL_PATH:?set MODEL_PATH to the policy model (HF directory, checkpoint or GGUF)}"
export MODEL_PATH
for v in ENV_CONFIG TOOLS_CONFIG DATA_PATH; do
  if [[ -n "${!v:-}" ]]; then export "${v?}"; fi
done
CKPT_ARGS="${CKPT_ARGS:---save-interval 20 --keep-checkpoints 3}"
ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-batch-size 32 --num-rollouts-per-prompt 8 --max-staleness 2 --default-max-tokens 96}"
OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-4 --lr-schedule constant --weight-decay 0 --adam-beta2 0.95 --max-grad-norm 1.0}"
LORA_ARGS="${LORA_ARGS:-}"
EVAL_ARGS="${EVAL_ARGS:---env-eval-interval 5 --env-eval-tasks 40}"

if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host)
fi
# shellcheck disable=SC2086 # the groups are word lists
exec "$BIN" run --plugin "$ROOT/methods/binary-rl" $CKPT_ARGS $ROLLOUT_ARGS $OPTIMIZER_ARGS \
  $LORA_ARGS $EVAL_ARGS "$@"
