#!/usr/bin/env bash
# opd with LoRA adapters on Qwen3-7B. On-policy distillation: the hint judge extracts a hint from the next state; the hinted teacher's logprobs on the response give a token-level advantage.
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
#   CKPT_SAVE_DIR     where checkpoints go (default: checkpoints/opd-qwen3-7b-lora)
#   CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS   flag groups (defaults below)
#   TRAIN_GPUS ROLLOUT_GPUS   CUDA device lists (a build with the `cuda` feature)
set -euo pipefail
METHOD_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export METHOD_DIR RUN_NAME="opd-qwen3-7b-lora"
export CKPT_ARGS="${CKPT_ARGS:---save-interval 1 --keep-checkpoints 3 --resume-from-checkpoint latest}"
export ROLLOUT_ARGS="${ROLLOUT_ARGS:---rollout-batch-size 16 --num-rollouts-per-prompt 1 --max-staleness 2 --default-max-tokens 8192 --majority-vote-n 1 --judge-temperature 0.6 --judge-max-tokens 8192 --teacher frozen}"
export OPTIMIZER_ARGS="${OPTIMIZER_ARGS:---lr 1e-4 --lr-schedule constant --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.98 --max-grad-norm 1.0}"
export LORA_ARGS="${LORA_ARGS:---use-lora --lora-rank 16 --lora-alpha 32 --lora-dropout 0 --lora-target-modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj}"
exec "$METHOD_DIR/../../scripts/run-method.sh" "$@"
