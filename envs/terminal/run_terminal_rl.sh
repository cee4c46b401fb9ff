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
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS   flag groups (defaults: scripts/run-env.sh)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_NAME="terminal-rl" MAX_STEPS="${MAX_STEPS:-10}" ENV_MAX_TOKENS=512 ENV_EVAL_TASKS=6
# shellcheck source=../../scripts/run-env.sh
source "$ENV_DIR/../../scripts/run-env.sh"
