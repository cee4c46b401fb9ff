#!/usr/bin/env bash
# GRPO on the terminal environment (envs/terminal): groups of episodes per task, the shell
# tools run in the sandbox, the task's pytest suite scored after the loop (share passed), one
# sample per agent step with its episode's group-normalised advantage, trained in the
# background while the policy keeps serving.
# A thin wrapper over `openclaw-host run --env`: every variable below can be set; anything after
# the script's name is passed on (it wins over the groups).
#
#   MODEL_PATH        the policy (HF directory, checkpoint or GGUF); required
#   ENV_TYPE          the environment: a crate directory, a library or a name under envs/ (terminal)
#   ENV_CONFIG        the environment's configuration (default: envs/terminal/config.toml)
#   TOOLS_CONFIG      the tools and their limits: a TOML file of [tools.<name>] tables (those listed are offered)
#   DATA_PATH         a task file (the original's JSONL of {"task": {task_name, task_path,
#                     instruction}}); default: the environment's own tasks (tasks_dir, or the
#                     built-in set)
#   MAX_STEPS         agent steps per episode before it is cut off (still scored)
#   PARALLEL_ENVS     episodes running at once
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/terminal-rl)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS   flag groups (defaults below)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$ENV_DIR/../.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
export ENV_TYPE="${ENV_TYPE:-$ENV_DIR}"
export MAX_STEPS="${MAX_STEPS:-10}"
export PARALLEL_ENVS="${PARALLEL_ENVS:-8}"
export CKPT_SAVE_DIR="${CKPT_SAVE_DIR:-$ROOT/checkpoints/terminal-rl}"
: "${MODEL_PATH:?set MODEL_PATH to the policy model (HF directory, checkpoint or GGUF)}"
export MODEL_PATH
for v in ENV_CONFIG TOOLS_CONFIG DATA_PATH; do
  if [[ -n "${!v:-}" ]]; then export "${v?}"; fi
done
CKPT_ARGS="${CKPT_ARGS:---save-interval 20 --keep-checkpoints 3}"
ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-batch-size 32 --num-rollouts-per-prompt 8 --max-staleness 2 --default-max-tokens 512}"
OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-4 --lr-schedule constant --weight-decay 0 --adam-beta2 0.95 --max-grad-norm 1.0}"
LORA_ARGS="${LORA_ARGS:-}"
EVAL_ARGS="${EVAL_ARGS:---env-eval-interval 5 --env-eval-tasks 6}"

if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host)
fi
# shellcheck disable=SC2086 # the groups are word lists
exec "$BIN" run --plugin "$ROOT/methods/binary-rl" $CKPT_ARGS $ROLLOUT_ARGS $OPTIMIZER_ARGS \
  $LORA_ARGS $EVAL_ARGS "$@"
