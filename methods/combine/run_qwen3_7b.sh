#!/usr/bin/env bash
# combine on Qwen3-7B. Binary RL and on-policy distillation on every turn: w_opd * (teacher - old) + w_rl * A_rl.
# A thin wrapper over `openclaw-host run`: every group below is an environment variable you can
# replace whole, as with the original's launch scripts; anything after the script's name is
# passed on (it wins over the groups).
#
#   MODEL_PATH        the policy (HF directory: config.json, safetensors, tokenizer.json); required
#   JUDGE_MODEL_PATH  the judge model (hints; the outcome votes too unless PRM_MODEL_PATH is set)
#   JUDGE_ENDPOINT    an OpenAI-compatible server to judge with (e.g. the judge served by vLLM)
#   PRM_MODEL_PATH    the judge model answering the outcome (PRM) prompt
#   OPENCLAW_JUDGE    self (the starting policy judges itself) or rule; one judge must be named
#   DATA_PATH         trajectory JSONL: train offline on it (`openclaw-host train`) instead of serving
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/combine-qwen3-7b)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS   flag groups (defaults: scripts/run-method.sh)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
METHOD_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_NAME="combine-qwen3-7b" METHOD_LORA=0
METHOD_ROLLOUT_ARGS="--majority-vote-n 3 --judge-temperature 0.6 --judge-max-tokens 4096 --teacher frozen"
# shellcheck source=../../scripts/run-method.sh
source "$METHOD_DIR/../../scripts/run-method.sh"
