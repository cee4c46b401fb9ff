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
#                     (or the same as JSON, {"tools": {...}})
#   DATA_PATH         a task file (JSONL of {question, answer}, GSM8K's layout too); default: the
#                     environment's own problems
#   MAX_STEPS         agent steps per episode before it is cut off (still scored)
#   PARALLEL_ENVS     episodes running at once
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/toolcall-rl)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS   flag groups (defaults: scripts/run-env.sh)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_NAME="toolcall-rl" MAX_STEPS="${MAX_STEPS:-4}" ENV_MAX_TOKENS=96 ENV_EVAL_TASKS=40
# shellcheck source=../../scripts/run-env.sh
source "$ENV_DIR/../../scripts/run-env.sh"
