#!/usr/bin/env bash
# GRPO on the SWE environment (envs/swe): groups of episodes per SWE-bench instance, the
# agent's bash blocks run in the sandbox in /testbed as mini-swe-agent's, the instance resolved
# (reward 1) only when every FAIL_TO_PASS and PASS_TO_PASS test passes in a fresh checkout;
# one sample per agent step with its episode's group-normalised advantage, trained in the
# background while the policy keeps serving.
# A thin wrapper over `openclaw-host run --env`: every variable below can be set; anything after
# the script's name is passed on (it wins over the groups).
#
#   MODEL_PATH        the policy (HF directory, checkpoint or GGUF); required
#   ENV_TYPE          the environment: a crate directory, a library or a name under envs/ (swe)
#   SWE_BENCH_PATH    the instances: a SWE-bench JSONL file or a folder of them, with their
#                     repositories (ENV_CONFIG's env.repos, or each row's repo_dir); default:
#                     the 22 built-in instances
#   ENV_CONFIG        the environment's configuration (default: envs/swe/config.toml)
#   DATA_PATH         a task file of {"instance_id": ...} rows, a subset of the instances;
#                     default: the train split
#   MAX_STEPS         agent replies per episode before it is cut off (still scored)
#   PARALLEL_ENVS     episodes running at once (the original's SWE_MAX_CONCURRENT)
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/swe-rl)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS   flag groups (defaults: scripts/run-env.sh)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n "${SWE_MAX_CONCURRENT:-}" && -z "${PARALLEL_ENVS:-}" ]]; then
  PARALLEL_ENVS="$SWE_MAX_CONCURRENT"
fi
RUN_NAME="swe-rl" MAX_STEPS="${MAX_STEPS:-20}" ENV_MAX_TOKENS=1024 ENV_EVAL_TASKS=6
# shellcheck source=../../scripts/run-env.sh
source "$ENV_DIR/../../scripts/run-env.sh"
