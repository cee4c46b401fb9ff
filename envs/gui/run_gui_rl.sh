#!/usr/bin/env bash
# GRPO on the GUI environment (envs/gui): groups of episodes per task, each in its own headless
# Chromium driven over WebDriver with the computer_use actions (0..999 grid), the page's final
# state scored by the task's check (1 solved, 0 not); one sample per agent step with its
# episode's group-normalised advantage, trained in the background while the policy keeps
# serving. Each step's observation is the page's accessibility tree; its screenshot is kept.
# A thin wrapper over `openclaw-host run --env`: every variable below can be set; anything after
# the script's name is passed on (it wins over the groups).
#
#   MODEL_PATH          the policy (HF directory, checkpoint or GGUF); required
#   ENV_TYPE            the environment: a crate directory, a library or a name under envs/ (gui)
#   SCREENSHOT_BACKEND  the browser driver: webdriver (the original's playwright and selenium
#                       are refused, saying what to use)
#   ENV_CONFIG          the environment's configuration (default: envs/gui/config.toml; its
#                       tasks_dir names your own task set)
#   DATA_PATH           a task file of {"task_name": ...} rows, a subset of the tasks; default:
#                       the train split
#   MAX_STEPS           actions per episode before it is cut off (still scored)
#   PARALLEL_ENVS       episodes (browsers, about 230 MB each) running at once (the original's
#                       GUI_POOL_MAX_ENVS)
#   CKPT_SAVE_DIR       where checkpoints go (default: checkpoints/gui-rl)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS   flag groups (defaults: scripts/run-env.sh)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n "${GUI_POOL_MAX_ENVS:-}" && -z "${PARALLEL_ENVS:-}" ]]; then
  PARALLEL_ENVS="$GUI_POOL_MAX_ENVS"
fi
RUN_NAME="gui-rl" MAX_STEPS="${MAX_STEPS:-15}" ENV_MAX_TOKENS=256 ENV_EVAL_TASKS=7
# shellcheck source=../../scripts/run-env.sh
source "$ENV_DIR/../../scripts/run-env.sh"
