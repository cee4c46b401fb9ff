#!/usr/bin/env bash
# opd on Qwen3-7B. On-policy distillation: the hint judge extracts a hint from the next state; the hinted teacher's logprobs on the response give a token-level advantage.
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
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/opd-qwen3-7b)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS   flag groups (defaults: scripts/run-method.sh)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
METHOD_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RUN_NAME="opd-qwen3-7b" METHOD_LORA=0
METHOD_ROLLOUT_ARGS="--majority-vote-n 1 --judge-temperature 0.6 --judge-max-tokens 8192 --teacher frozen"
# shellcheck source=../../scripts/run-method.sh
source "$METHOD_DIR/../../scripts/run-method.sh"
