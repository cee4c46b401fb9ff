#!/usr/bin/env bash
# Types every step of docs/migrating.md in order and checks what each one does.
#
#   OPENCLAW_HOST_BIN  the binary (default: target/debug/openclaw-host), as for the launch
#                      scripts
#   WORK               a scratch directory (default: a new temporary one, removed on success
#                      unless KEEP_WORK=1)
#   PLUGIN_LIB_DIR     where the built plugin libraries are (default: beside the binary); a
#                      plugin without a library there is given as its crate directory
#   ALLOW_CARGO=1      let the binary run cargo (to build a plugin that is missing or stale);
#                      by default a `cargo` that refuses is put first on PATH, so nothing builds
#   OPENCLAW_NODE      a node that runs TypeScript files (Node 24) for step 34; with the
#   OPENAI_NODE_MODULES  folder holding the `openai` package (default tests/clients/node_modules).
#                      Without both, step 34 sends the same request with curl.
#   STEP_TIMEOUT       seconds one command may take (default 300)
#
# Each step prints `== step N: what`, the command as the page writes it (`$ ...`), then the end
# of its output. The page's placeholders are replaced before a command runs (the table is
# printed at the start). Needs bash, curl, python3 (steps 25 and 32), bubblewrap (steps 27, 29
# and 41).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# --- the binary, the scratch directory, the plugins -------------------------------------------
# OPENCLAW_HOST is the address to bind, as in the original.
unset OPENCLAW_HOST
OPENCLAW_HOST_BIN="${OPENCLAW_HOST_BIN:-target/debug/openclaw-host}"
if [[ ! -x "$OPENCLAW_HOST_BIN" ]]; then
  echo "migrating: no binary at $OPENCLAW_HOST_BIN (set OPENCLAW_HOST_BIN)" >&2
  exit 2
fi
OPENCLAW_HOST_BIN="$(cd "$(dirname "$OPENCLAW_HOST_BIN")" && pwd)/$(basename "$OPENCLAW_HOST_BIN")"
export OPENCLAW_HOST_BIN
PLUGIN_LIB_DIR="${PLUGIN_LIB_DIR:-$(dirname "$OPENCLAW_HOST_BIN")}"
made_work=0
if [[ -z "${WORK:-}" ]]; then
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/migrating.XXXXXX")"
  made_work=1
fi
mkdir -p "$WORK/bin" "$WORK/data"
WORK="$(cd "$WORK" && pwd)"
export WORK
STEP_TIMEOUT="${STEP_TIMEOUT:-300}"

# `openclaw-host` on PATH, as the page types it.
ln -sf "$OPENCLAW_HOST_BIN" "$WORK/bin/openclaw-host"
if [[ "${ALLOW_CARGO:-0}" != 1 ]]; then
  cat >"$WORK/bin/cargo" <<'EOF'
#!/bin/sh
echo "cargo is switched off by scripts/migrating.sh (ALLOW_CARGO=1 allows it): cargo $*" >&2
exit 101
EOF
  chmod +x "$WORK/bin/cargo"
  export CARGO="$WORK/bin/cargo"
fi
export PATH="$WORK/bin:$PATH"

# The original's variables from the caller's shell would change what each step does.
unset MODEL_PATH BASE_MODEL_PATH JUDGE_MODEL_PATH PRM_MODEL_PATH OPENCLAW_JUDGE JUDGE_ENDPOINT \
  DATA_PATH CKPT_SAVE_DIR CKPT_ARGS ROLLOUT_ARGS OPTIMIZER_ARGS LORA_ARGS EVAL_ARGS \
  TRAIN_GPUS ROLLOUT_GPUS PRM_GPUS ENV_TYPE ENV_CONFIG TOOLS_CONFIG MAX_STEPS PARALLEL_ENVS \
  TINKER_API_KEY TINKER_ENDPOINT SCREENSHOT_BACKEND SWE_BENCH_PATH MAJORITY_VOTE_N \
  MAJORITY_VOTE_THRESHOLD NUM_JUDGE_WORKERS OPENCLAW_API_KEY OPENCLAW_PLUGIN RL_BUFFER_DIR \
  OPENCLAW_LOG_DIR OPENCLAW_SIMULATE_USERS ENV_POOL_URL RESUME_CKPT
# Every server binds a free port (the original's 8000 may be taken).
export OPENCLAW_PORT=0

# A plugin's library beside the binary, else its crate directory (which the binary builds).
plugin() {
  if [[ -f "$PLUGIN_LIB_DIR/lib$1.so" ]]; then echo "$PLUGIN_LIB_DIR/lib$1.so"; else echo "$2"; fi
}
BINARY_RL="$(plugin openclaw_method_binary_rl methods/binary-rl)"
OPD="$(plugin openclaw_method_opd methods/opd)"
COMBINE="$(plugin openclaw_method_combine methods/combine)"
MY_METHOD="$(plugin my_method examples/my-method)"
MY_ROLLOUT="$(plugin my_rollout examples/my-rollout)"
MY_GENERATE="$(plugin my_generate examples/my-generate)"
TERMINAL="$(plugin openclaw_env_terminal terminal)"
TOOLCALL="$(plugin openclaw_env_toolcall toolcall)"
SWE="$(plugin openclaw_env_swe swe)"
GUI="$(plugin openclaw_env_gui gui)"
MODEL="$WORK/default-model"
TINY="$WORK/tiny-model"

# --- bookkeeping ------------------------------------------------------------------------------
n_typed=0 n_refused=0 n_nothing=0
FAILS=()
SKIPPED=()
CUR=0 S="" PORT="" SERVER_PID=""

cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

# step N WHAT KIND: KIND is typed, refused or nothing (how the summary counts it).
step() {
  CUR=$1 S="$WORK/s$1"
  mkdir -p "$S"
  export S RL_BUFFER_DIR="$S/rl_buffer" OPENCLAW_LOG_DIR="$S/logs"
  unset CKPT_SAVE_DIR
  echo
  echo "== step $1: $2"
  case $3 in
    typed) n_typed=$((n_typed + 1)) ;;
    refused) n_refused=$((n_refused + 1)) ;;
    nothing) n_nothing=$((n_nothing + 1)) ;;
  esac
}

# Use the buffer, logs and checkpoints of an earlier step.
reuse_step() {
  export RL_BUFFER_DIR="$WORK/s$1/rl_buffer" OPENCLAW_LOG_DIR="$WORK/s$1/logs"
  export CKPT_SAVE_DIR="$WORK/s$1/checkpoints"
}

fail() {
  FAILS+=("step $CUR: $1")
  echo "   FAILED: $1"
}

nothing() { echo "   nothing to type: $1"; }
skipped() {
  SKIPPED+=("$CUR")
  echo "   skipped: $1"
}
note() { echo "   $1"; }

# The page's command, with its placeholders replaced by what exists here.
map() {
  local c=" $1 "
  c="${c//" bash methods/binary-rl/run_qwen3_7b.sh "/" bash methods/binary-rl/run_qwen3_7b.sh --plugin $BINARY_RL "}"
  c="${c//" bash methods/binary-rl/run_qwen3_7b_lora.sh "/" bash methods/binary-rl/run_qwen3_7b_lora.sh --plugin $BINARY_RL "}"
  c="${c//" bash methods/opd/run_qwen3_7b.sh "/" bash methods/opd/run_qwen3_7b.sh --plugin $OPD "}"
  c="${c//" bash methods/combine/run_qwen3_7b.sh "/" bash methods/combine/run_qwen3_7b.sh --plugin $COMBINE "}"
  c="${c//" bash envs/terminal/run_terminal_rl.sh "/" bash envs/terminal/run_terminal_rl.sh --plugin $BINARY_RL "}"
  c="${c//" bash envs/toolcall/run_toolcall_rl.sh "/" bash envs/toolcall/run_toolcall_rl.sh --plugin $BINARY_RL "}"
  c="${c//" bash envs/swe/run_swe_rl.sh "/" bash envs/swe/run_swe_rl.sh --plugin $BINARY_RL "}"
  c="${c//" bash envs/gui/run_gui_rl.sh "/" bash envs/gui/run_gui_rl.sh --plugin $BINARY_RL "}"
  c="${c//" --plugin methods/binary-rl "/" --plugin $BINARY_RL "}"
  c="${c//" --plugin methods/combine "/" --plugin $COMBINE "}"
  c="${c//" examples/my-method "/" $MY_METHOD "}"
  c="${c//" examples/my-rollout "/" $MY_ROLLOUT "}"
  c="${c//" examples/my-generate "/" $MY_GENERATE "}"
  c="${c//" ENV_TYPE=terminal "/" ENV_TYPE=$TERMINAL "}"
  c="${c//" ENV_TYPE=toolcall "/" ENV_TYPE=$TOOLCALL "}"
  c="${c//" ENV_TYPE=swe "/" ENV_TYPE=$SWE "}"
  c="${c//" ENV_TYPE=gui "/" ENV_TYPE=$GUI "}"
  c="${c//\/path\/to\/swe-bench/$WORK/swe-bench}"
  c="${c//\/path\/to\/base\/model/$MODEL}"
  c="${c//\/path\/to\/judge\/model/$MODEL}"
  c="${c//\/path\/to\/prm\/model/$MODEL}"
  c="${c//\/path\/to\/agent\/model/$TINY}"
  c="${c//\/path\/to\/prm\/classifier/$S/prm-classifier}"
  c="${c//.\/checkpoints/$S/checkpoints}"
  c="${c//.\/data\//$WORK/data/}"
  c="${c//.\/rl_buffer/$RL_BUFFER_DIR}"
  c="${c//.\/logs\//$OPENCLAW_LOG_DIR/}"
  c="${c//.\/toolcall-rl\//$WORK/toolcall-rl/}"
  c="${c//.\/client\//$WORK/client/}"
  c="${c//.\/eval.png/$S/eval.png}"
  c="${c//" --dir . "/" --dir $S "}"
  c="${c//OPENCLAW_PORT=8000/OPENCLAW_PORT=0}"
  c="${c//http:\/\/127.0.0.1:8000/http://127.0.0.1:$PORT}"
  c="${c:1:${#c}-2}"
  printf '%s' "$c"
}

# Runs the page's command; its output goes to $S/out.txt. Returns its exit status.
run_cmd() {
  local mapped rc=0
  mapped="$(map "$1")"
  printf '$ %s\n' "$1"
  timeout -k 10 "$STEP_TIMEOUT" bash -c "$mapped" >"$S/out.txt" 2>&1 || rc=$?
  tail -n "${SHOW:-3}" "$S/out.txt" | cut -c1-220 | sed 's/^/   | /'
  if [[ $rc == 124 || $rc == 137 ]]; then
    echo "   (ran past ${STEP_TIMEOUT}s; typed as: $mapped)"
  fi
  return $rc
}

# typed CMD [REGEX...]: must exit 0 and print each REGEX.
typed() {
  local cmd=$1 rc=0 re
  shift
  run_cmd "$cmd" || rc=$?
  if [[ $rc != 0 ]]; then
    fail "exited $rc: $cmd"
    return 0
  fi
  for re in "$@"; do
    grep -Eq -- "$re" "$S/out.txt" || fail "no \`$re\` in the output of: $cmd"
  done
}

# refused CMD NAME...: must exit non-zero (not a timeout) with a message naming each NAME.
refused() {
  local cmd=$1 rc=0 name
  shift
  run_cmd "$cmd" || rc=$?
  if [[ $rc == 0 ]]; then
    fail "accepted, but the page says it is refused: $cmd"
    return 0
  fi
  if [[ $rc == 124 || $rc == 137 ]]; then
    fail "timed out instead of being refused: $cmd"
    return 0
  fi
  for name in "$@"; do
    grep -Fq -- "$name" "$S/out.txt" || fail "the refusal does not name \`$name\`: $cmd"
  done
  echo "   refused (exit $rc), naming: $*"
}

# expect_file PATH...: each must exist.
expect_file() {
  local p
  for p in "$@"; do
    if [[ -e "$p" ]]; then echo "   ok: ${p#"$WORK"/}"; else fail "missing ${p#"$WORK"/}"; fi
  done
}

# expect_in FILE REGEX...: each must match a line of FILE.
expect_in() {
  local f=$1 re
  shift
  for re in "$@"; do
    grep -Eq -- "$re" "$f" || fail "no \`$re\` in ${f#"$WORK"/}"
  done
}

# Starts the page's server command in the background and waits for its address.
start_server() {
  local mapped i
  mapped="$(map "$1")"
  printf '$ %s &\n' "$1"
  timeout -k 10 "$STEP_TIMEOUT" bash -c "exec $mapped" >"$S/serve.log" 2>&1 &
  SERVER_PID=$!
  PORT=""
  for i in $(seq 1 150); do
    PORT="$(sed -n 's|^serving .* on http://127\.0\.0\.1:\([0-9]*\)/v1$|\1|p' "$S/serve.log" | head -n 1)"
    [[ -n "$PORT" ]] && curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break
    PORT=""
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.2
  done
  sed 's/^/   | /' "$S/serve.log" | head -n 3
  if [[ -z "$PORT" ]]; then
    fail "the server did not start: $1"
    return 1
  fi
}

stop_server() {
  printf '$ kill %%1\n'
  kill -TERM "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

# --- what stands in for what a user has ----------------------------------------------------------
echo "migrating: binary $OPENCLAW_HOST_BIN"
echo "migrating: scratch $WORK"
echo "migrating: plugins $BINARY_RL"
echo "           (cargo: $([[ "${ALLOW_CARGO:-0}" == 1 ]] && echo allowed || echo switched off))"
echo "migrating: the page's placeholders here:"
echo "  /path/to/base/model (and judge, prm)  -> the built-in model, written by init-default-model"
echo "  /path/to/agent/model                  -> a random tiny model from init-model (2,048-token context)"
echo "  methods/*, examples/*, envs/* plugins -> their libraries in $PLUGIN_LIB_DIR when built"
echo "  ./checkpoints ./rl_buffer ./logs/ ./data/ -> folders under the scratch directory"
echo "  port 8000                             -> a free port (OPENCLAW_PORT=0)"
openclaw-host --version
openclaw-host init-default-model --out "$MODEL" | sed 's/^/   | /'
openclaw-host init-model --preset tiny --out "$TINY" --train-text README.md docs/environments.md \
  | sed 's/^/   | /'
export MODEL TINY BINARY_RL OPD COMBINE MY_METHOD MY_ROLLOUT MY_GENERATE TERMINAL TOOLCALL SWE GUI

# --- the 45 steps --------------------------------------------------------------------------------
step 1 "the four loops (serving, rollout collection, judging, training)" nothing
nothing "\`openclaw-host run\` runs all four in one process (steps 10 to 12)"

step 2 "git clone https://github.com/Gen-Verse/OpenClaw-RL && cd OpenClaw-RL" nothing
skipped "needs the network; this repository is the checkout, and \`cargo build --release -p openclaw-host\` builds it"

step 3 "pip install -r requirements.txt" nothing
nothing "one Rust binary; no Python packages"

step 4 "cd slime && pip install -e . && cd .." nothing
nothing "training is built into the binary; there is no slime"

step 5 "pip install sglang" nothing
nothing "serving is built in; \`--backend sglang\` is refused (step 33)"

step 6 "the method and track folders" typed
SHOW=6 typed 'ls -d methods/binary-rl methods/opd methods/combine envs/terminal envs/toolcall examples/my-method' \
  'methods/binary-rl' 'envs/toolcall'

step 7 "choose Binary RL (GRPO)" nothing
nothing "a choice: methods/binary-rl (step 10)"

step 8 "choose OPD" nothing
nothing "a choice: methods/opd (step 11)"

step 9 "choose the combination" nothing
nothing "a choice: methods/combine (step 12)"

step 10 "Binary RL: MODEL_PATH, DATA_PATH, CKPT_SAVE_DIR, the launch script" typed
echo "   writing ./data/trajectories.jsonl (the format of step 31)"
cat >"$WORK/data/trajectories.jsonl" <<'EOF'
{"session_id": "s1", "turns": [{"type": "main", "prompt": "Help me understand erosion.", "response": "## Erosion\n\n- **wind**\n- **water**", "next_state": "That's not what I asked. Please answer in plain text, no markdown.", "trainable": true}, {"type": "side", "prompt": "Summarise the chat so far.", "response": "The user asked about erosion.", "next_state": null, "trainable": false}, {"type": "main", "prompt": "Help me understand erosion.", "response": "Erosion is the slow wearing away of rock and soil by wind and water.", "next_state": "Perfect, thanks.", "trainable": true}]}
{"session_id": "s2", "turns": [{"type": "main", "prompt": "What causes tides?", "response": "Tides come from the moon's pull on the oceans.", "next_state": "Great, that helps.", "trainable": true}, {"type": "main", "prompt": "And why two a day?", "response": "# Tides\n\n1. **Moon**\n2. **Earth**", "next_state": "Too formatted. Just write it in plain text.", "trainable": true}]}
EOF
refused 'MODEL_PATH=/path/to/base/model DATA_PATH=./data/trajectories.jsonl CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh' \
  'no judge is named' 'PRM_MODEL_PATH' 'OPENCLAW_JUDGE'
typed 'MODEL_PATH=/path/to/base/model DATA_PATH=./data/trajectories.jsonl CKPT_SAVE_DIR=./checkpoints OPENCLAW_JUDGE=rule bash methods/binary-rl/run_qwen3_7b.sh' \
  '4 training samples' 'trained 1 steps'
expect_file "$S/checkpoints/checkpoint-1" "$S/checkpoints/checkpoint-latest"

step 11 "OPD: MODEL_PATH, JUDGE_MODEL_PATH, DATA_PATH, the launch script" typed
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule DATA_PATH=./data/trajectories.jsonl CKPT_SAVE_DIR=./checkpoints bash methods/opd/run_qwen3_7b.sh' \
  'trained 1 steps'
expect_file "$S/checkpoints/checkpoint-latest"

step 12 "the combination: the launch script (live, while serving)" typed
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/combine/run_qwen3_7b.sh --max-steps 2' \
  '^step +2 ' 'stopped after step 2'
expect_file "$S/checkpoints/checkpoint-2" "$OPENCLAW_LOG_DIR/training.log" "$OPENCLAW_LOG_DIR/score.log"

step 13 "model paths: MODEL_PATH, JUDGE_MODEL_PATH, PRM_MODEL_PATH" typed
typed 'MODEL_PATH=/path/to/base/model JUDGE_MODEL_PATH=/path/to/judge/model PRM_MODEL_PATH=/path/to/prm/model openclaw-host config --plugin methods/combine | grep model_path' \
  '^model_path = .*# env MODEL_PATH' '^judge_model_path = .*# env JUDGE_MODEL_PATH' \
  '^prm_model_path = .*# env PRM_MODEL_PATH'

step 14 "training: CKPT_SAVE_DIR, CKPT_ARGS" typed
typed 'export CKPT_SAVE_DIR=./checkpoints; export CKPT_ARGS="--save-interval 100 --save-dir $CKPT_SAVE_DIR"; MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 bash methods/binary-rl/run_qwen3_7b.sh --max-steps 2' \
  'stopped after step 2'
expect_file "$S/checkpoints/checkpoint-2" "$S/checkpoints/checkpoint-latest"

step 15 "rollout: ROLLOUT_ARGS" refused
refused 'ROLLOUT_ARGS="--rollout-batch-size 64 --num-rollouts-per-prompt 4" MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  'num_rollouts_per_prompt' '--num-rollouts-per-prompt'
typed 'ROLLOUT_ARGS="--rollout-batch-size 64 --num-rollouts-per-prompt 1" MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  '^step +1 .* 64 samples'

step 16 "optimizer: OPTIMIZER_ARGS" typed
typed 'OPTIMIZER_ARGS="--lr 1e-6 --weight-decay 0.01 --adam-beta1 0.9 --adam-beta2 0.999" MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  'stopped after step 1'
expect_in "$OPENCLAW_LOG_DIR/training.log" '"lr":1e-6'
expect_in "$S/checkpoints/checkpoint-1/trainer_state.json" '"beta2": 0.999' '"weight_decay": 0.01'

step 17 "GPUs: TRAIN_GPUS, ROLLOUT_GPUS" refused
refused 'TRAIN_GPUS="0,1,2,3" ROLLOUT_GPUS="4,5,6,7" MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  'TRAIN_GPUS' 'cuda'

step 18 "LoRA settings: LORA_ARGS without --use-lora" refused
refused 'LORA_ARGS="--lora-rank 64 --lora-alpha 128 --lora-dropout 0.05" MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  'lora_rank' '--use-lora'

step 19 "LoRA training: LORA_ARGS with --use-lora, or the LoRA launch script" typed
typed 'LORA_ARGS="--use-lora --lora-rank 64 --lora-alpha 128" MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  'stopped after step 1'
expect_file "$S/checkpoints/checkpoint-1/adapter_model.safetensors"
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints/lora bash methods/binary-rl/run_qwen3_7b_lora.sh --max-steps 1' \
  'stopped after step 1'
expect_file "$S/checkpoints/lora/checkpoint-1/adapter_config.json"

step 20 "custom loss: --custom-loss-function-path" refused
refused 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-loss-function-path ./my_method/custom_loss.py' \
  'custom_loss_function_path' 'Python file' 'plugins new my-loss --kind loss'
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-loss-function-path examples/my-method --max-steps 1' \
  'stopped after step 1'
expect_in "$OPENCLAW_LOG_DIR/training.log" '"kl_loss"'

step 21 "custom rollout: --rollout-function-path" refused
refused 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --rollout-function-path ./my_method/custom_rollout.py' \
  'rollout_function_path' 'Python file' 'plugins new my-rollout --kind rollout'
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --rollout-function-path examples/my-rollout --max-steps 1' \
  'stopped after step 1'

step 22 "custom generation: --custom-generate-function-path" refused
refused 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-generate-function-path ./my_method/custom_generate.py' \
  'custom_generate_function_path' 'Python file' 'plugins new my-generate --kind generate'
printf '{"prompt": "Say hello in a few words."}\n{"prompt": "Name a colour."}\n' >"$WORK/data/prompts.jsonl"
refused 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-generate-function-path examples/my-generate --data-path ./data/prompts.jsonl --max-steps 1' \
  'num_rollouts_per_prompt' 'at least 2'
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-generate-function-path examples/my-generate --data-path ./data/prompts.jsonl --num-rollouts-per-prompt 4 --max-steps 1' \
  'stopped after step 1'

step 23 "custom reward model: --custom-rm-path" refused
refused 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-rm-path ./my_method/custom_rm.py' \
  'custom_rm_path' 'Python file' 'plugins new my-reward --kind reward'
note "the crate that replaces it (examples/my-method) runs in step 25"

step 24 "write the custom loss (compute_loss: ratio, clipping, KL penalty)" typed
typed 'openclaw-host plugins new my-loss --kind loss --dir .' 'created plugin crate'
expect_file "$S/my-loss/src/loss.rs" "$S/my-loss/plugin.toml"
typed 'openclaw-host plugins test examples/my-method' \
  'gradient matches finite differences' ' 0 failed'

step 25 "write the custom reward model (a sequence classifier's positive class)" typed
echo "   making /path/to/prm/classifier: the built-in model with a random 2-class head (a stand-in; its scores mean nothing)"
if command -v python3 >/dev/null; then
  cp -r "$MODEL" "$S/prm-classifier"
  python3 - "$S/prm-classifier" <<'EOF'
import json, random, struct, sys
d = sys.argv[1]
cfg = json.load(open(f"{d}/config.json"))
cfg["architectures"] = ["Qwen3ForSequenceClassification"]
cfg["id2label"] = {"0": "bad", "1": "good"}
cfg["label2id"] = {"bad": 0, "good": 1}
json.dump(cfg, open(f"{d}/config.json", "w"), indent=2)
raw = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
h, rnd = cfg["hidden_size"], random.Random(0)
w = struct.pack(f"<{2 * h}f", *[rnd.gauss(0, 0.02) for _ in range(2 * h)])
header["score.weight"] = {"dtype": "F32", "shape": [2, h], "data_offsets": [len(data), len(data) + len(w)]}
hb = json.dumps(header).encode()
hb += b" " * (-len(hb) % 8)
open(f"{d}/model.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + data + w)
EOF
  typed 'MODEL_PATH=/path/to/base/model OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --custom-rm-path examples/my-method --prm-model-path /path/to/prm/classifier --max-steps 1' \
    'stopped after step 1'
else
  skipped "python3 is needed to write the stand-in classifier"
fi

step 26 "Tinker: TINKER_API_KEY, TINKER_ENDPOINT, ray job submit" refused
refused 'TINKER_API_KEY=sk-example TINKER_ENDPOINT=https://tinker.example MODEL_PATH=/path/to/base/model bash methods/combine/run_qwen3_7b.sh' \
  'TINKER_API_KEY' 'unset it'
note "no Ray here: the launch script runs on this machine (step 12)"

step 27 "terminal agent RL: ENV_TYPE=terminal, MAX_STEPS, PARALLEL_ENVS" typed
typed 'ENV_TYPE=terminal MAX_STEPS=20 PARALLEL_ENVS=32 MODEL_PATH=/path/to/agent/model CKPT_SAVE_DIR=./checkpoints bash envs/terminal/run_terminal_rl.sh --max-steps 1 --rollout-batch-size 4 --num-rollouts-per-prompt 2 --max-episode-steps 1 --default-max-tokens 16 --env-eval-interval 0' \
  '^step +1 .*episodes \(last [1-9]' 'stopped after step 1'

step 28 "GUI agent RL: ENV_TYPE=gui, SCREENSHOT_BACKEND, PARALLEL_ENVS" typed
refused 'ENV_TYPE=gui SCREENSHOT_BACKEND=playwright PARALLEL_ENVS=16 MODEL_PATH=/path/to/agent/model CKPT_SAVE_DIR=./checkpoints bash envs/gui/run_gui_rl.sh --max-steps 1' \
  'playwright' 'SCREENSHOT_BACKEND=webdriver'
typed 'ENV_TYPE=gui SCREENSHOT_BACKEND=webdriver PARALLEL_ENVS=2 MODEL_PATH=/path/to/agent/model CKPT_SAVE_DIR=./checkpoints bash envs/gui/run_gui_rl.sh --max-steps 1 --rollout-batch-size 2 --num-rollouts-per-prompt 2 --max-episode-steps 1 --default-max-tokens 16 --env-eval-interval 0' \
  '^step +1 .*episodes \(last [1-9]' 'stopped after step 1'

step 29 "tool-call agent RL: ENV_TYPE=toolcall, TOOLS_CONFIG, PARALLEL_ENVS" typed
mkdir -p "$WORK/toolcall-rl"
echo '{"tools": {"code_interpreter": {"timeout_seconds": 10, "max_calls": 4}}}' >"$WORK/toolcall-rl/tools_config.json"
echo '   writing ./toolcall-rl/tools_config.json: {"tools": {"code_interpreter": {"timeout_seconds": 10, "max_calls": 4}}}'
typed 'ENV_TYPE=toolcall TOOLS_CONFIG=./toolcall-rl/tools_config.json PARALLEL_ENVS=64 MODEL_PATH=/path/to/agent/model CKPT_SAVE_DIR=./checkpoints bash envs/toolcall/run_toolcall_rl.sh --max-steps 1 --rollout-batch-size 4 --num-rollouts-per-prompt 2 --max-episode-steps 1 --default-max-tokens 16 --env-eval-interval 0' \
  '^step +1 .*episodes \(last [1-9]' 'stopped after step 1'

step 30 "SWE agent RL: ENV_TYPE=swe, SWE_BENCH_PATH, PARALLEL_ENVS" typed
# A SWE-bench set of one instance: a repository with its base commit, and its row.
swe="$WORK/swe-bench"
mkdir -p "$swe/repos/acme__calc/calc"
printf 'def add(a, b):\n    return a - b\n' >"$swe/repos/acme__calc/calc/__init__.py"
printf '[tool.pytest.ini_options]\npythonpath = ["."]\n' >"$swe/repos/acme__calc/pyproject.toml"
git -C "$swe/repos/acme__calc" init -q -b main
git -C "$swe/repos/acme__calc" add -A
git -C "$swe/repos/acme__calc" -c user.name=t -c user.email=t@t commit -q -m base
base="$(git -C "$swe/repos/acme__calc" rev-parse HEAD)"
python3 - "$swe" "$base" <<'PY'
import json, sys
swe, base = sys.argv[1:]
test = ("diff --git a/tests/test_add.py b/tests/test_add.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/tests/test_add.py\n@@ -0,0 +1,4 @@\n+from calc import add\n+\n+def test_add():\n"
        "+    assert add(2, 3) == 5\n")
row = {"instance_id": "acme__calc-1", "repo": "acme/calc", "base_commit": base,
       "problem_statement": "add() subtracts", "test_patch": test,
       "FAIL_TO_PASS": json.dumps(["tests/test_add.py::test_add"]), "PASS_TO_PASS": "[]",
       "repo_dir": "repos/acme__calc"}
open(f"{swe}/swe.jsonl", "w").write(json.dumps(row) + "\n")
PY
echo "   writing ./swe-bench/swe.jsonl and its repository repos/acme__calc"
typed 'ENV_TYPE=swe SWE_BENCH_PATH=/path/to/swe-bench PARALLEL_ENVS=8 MODEL_PATH=/path/to/agent/model CKPT_SAVE_DIR=./checkpoints bash envs/swe/run_swe_rl.sh --max-steps 1 --rollout-batch-size 2 --num-rollouts-per-prompt 2 --max-episode-steps 1 --default-max-tokens 16 --env-eval-interval 0 --env-split all' \
  '^step +1 .*episodes \(last [1-9]' 'stopped after step 1'

step 31 "trajectory data: session_id, turns (type, prompt, response, next_state, trainable)" typed
reuse_step 12
typed 'openclaw-host buffer export --rl-buffer-dir ./rl_buffer --out ./data/exported.jsonl' 'wrote [0-9]+ sessions'
expect_in "$WORK/data/exported.jsonl" '"session_id":' '"turns":' '"type":"main"' '"next_state":\{' '"trainable":true'
note "the hand-written file of step 10 (main and side turns) trained: 4 samples from its 4 main turns"

step 32 "main and side turns from the API" typed
start_server 'openclaw-host serve --model-path /path/to/base/model --rl-buffer-dir ./rl_buffer' || true
if [[ -n "$PORT" ]]; then
  typed "curl -sf http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -H 'X-Session-Id: s1' -d '{\"model\": \"default\", \"messages\": [{\"role\": \"user\", \"content\": \"Help me understand erosion.\"}], \"max_tokens\": 24}'" \
    '"role":"assistant"'
  typed "curl -sf http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -H 'X-Session-Id: s1' -H 'X-Turn-Type: side' -d '{\"model\": \"default\", \"messages\": [{\"role\": \"user\", \"content\": \"Summarise the chat so far.\"}], \"max_tokens\": 8}'" \
    '"role":"assistant"'
  typed "curl -sf http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -H 'X-Session-Id: s1' -d '{\"model\": \"default\", \"messages\": [{\"role\": \"user\", \"content\": \"Help me understand erosion.\"}, {\"role\": \"assistant\", \"content\": \"Erosion is the wearing away of rock.\"}, {\"role\": \"user\", \"content\": \"Perfect, thanks.\"}], \"max_tokens\": 8}'" \
    '"role":"assistant"'
  stop_server
  SHOW=4 typed 'openclaw-host buffer export --rl-buffer-dir ./rl_buffer' \
    '"type":"main","turn_index":0,.*"next_state":\{"role":"user","content":"Perfect, thanks."\}' \
    '"type":"side","turn_index":1,.*"trainable":false'
fi

step 33 "the API server: BASE_MODEL_PATH, OPENCLAW_PORT, OPENCLAW_HOST, --enable-rl-intercept" refused
refused 'export BASE_MODEL_PATH=/path/to/base/model OPENCLAW_PORT=8000 OPENCLAW_HOST=127.0.0.1; openclaw-host serve --model-path $BASE_MODEL_PATH --port $OPENCLAW_PORT --backend sglang --enable-rl-intercept --rl-buffer-dir ./rl_buffer' \
  'backend' 'sglang'
export BASE_MODEL_PATH="$MODEL" OPENCLAW_HOST=127.0.0.1
start_server 'openclaw-host serve --model-path $BASE_MODEL_PATH --port $OPENCLAW_PORT --enable-rl-intercept --rl-buffer-dir ./rl_buffer' || true
unset BASE_MODEL_PATH OPENCLAW_HOST
if [[ -n "$PORT" ]]; then
  SHOW=2 typed 'curl -sf http://127.0.0.1:8000/metrics' '^openclaw_'
fi

step 34 "an OpenAI-compatible client, streaming (TypeScript)" typed
if [[ -n "$PORT" && -n "$SERVER_PID" ]]; then
  if [[ -n "${OPENCLAW_NODE:-}" ]]; then ln -sf "$OPENCLAW_NODE" "$WORK/bin/node"; fi
  modules="${OPENAI_NODE_MODULES:-$ROOT/tests/clients/node_modules}"
  if command -v node >/dev/null \
    && node -e 'process.exit(process.features.typescript ? 0 : 1)' 2>/dev/null \
    && [[ -d "$modules/openai" ]]; then
    mkdir -p "$WORK/client"
    ln -sfn "$modules" "$WORK/client/node_modules"
    echo "   writing ./client/chat.mts (the page's client, its base URL on this server's port)"
    cat >"$WORK/client/chat.mts" <<EOF
import OpenAI from "openai";

const client = new OpenAI({ baseURL: "http://localhost:$PORT/v1", apiKey: process.env.OPENCLAW_API_KEY ?? "local" });
const model: string = "default";
const messages = [{ role: "user" as const, content: "Help me understand erosion." }];
const stream = await client.chat.completions.create({ model, messages, stream: true });
for await (const chunk of stream) {
  process.stdout.write(chunk.choices[0]?.delta?.content ?? "");
}
process.stdout.write("\n");
EOF
    typed 'node ./client/chat.mts' '[a-zA-Z]'
  else
    note "no node that runs TypeScript files and no openai package here: the same request with curl"
    typed "curl -sfN http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' -d '{\"model\": \"default\", \"messages\": [{\"role\": \"user\", \"content\": \"Help me understand erosion.\"}], \"stream\": true}'" \
      '^data: \{.*"delta":\{.*"content"' '^data: \[DONE\]'
  fi
  stop_server
  reuse_step 33
  SHOW=1 typed 'openclaw-host buffer export --rl-buffer-dir ./rl_buffer' '"type":"main"' 'erosion'
else
  fail "no server from step 33"
fi

step 35 "PRM majority vote: MAJORITY_VOTE_N, MAJORITY_VOTE_THRESHOLD" typed
typed 'export MAJORITY_VOTE_N=5 MAJORITY_VOTE_THRESHOLD=0.6; MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --majority-vote-n $MAJORITY_VOTE_N --majority-vote-threshold $MAJORITY_VOTE_THRESHOLD --max-steps 1' \
  'votes \+1' 'stopped after step 1'

step 36 "a new method: its folder, README, launch script, custom_loss.py, custom_rollout.py" typed
typed 'openclaw-host plugins new my-new-method --kind loss,rollout --dir .' 'created plugin crate'
expect_file "$S/my-new-method/README.md" "$S/my-new-method/plugin.toml" "$S/my-new-method/src/loss.rs" \
  "$S/my-new-method/src/rollout.rs"
note "building and checking it (plugins test) needs cargo, which this script does not run"

step 37 "the new method's launch script (ray job submit ... python slime/train.py ...)" typed
typed 'MODEL_PATH=/path/to/base/model; CKPT_ARGS="--save-interval 100 --save-dir ./checkpoints"; ROLLOUT_ARGS="--rollout-batch-size 16"; OPTIMIZER_ARGS="--lr 1e-6"; OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 openclaw-host run --plugin methods/binary-rl --model-path $MODEL_PATH --custom-loss-function-path examples/my-method $CKPT_ARGS $ROLLOUT_ARGS $OPTIMIZER_ARGS --max-steps 1' \
  'stopped after step 1'
expect_file "$S/checkpoints/checkpoint-1"
note "examples/my-method stands in for the unbuilt my-new-method of step 36"

step 38 "monitor training (ray dashboard, watch ls, tail -f training.log)" typed
reuse_step 14
typed 'ls -la $CKPT_SAVE_DIR' 'checkpoint-latest -> checkpoint-2'
SHOW=1 typed 'tail -n 2 ./logs/training.log' '"step":2'
typed 'openclaw-host plot ./logs/training.log ./logs/score.log --out ./logs/curves.png' 'curves.png'
expect_file "$OPENCLAW_LOG_DIR/curves.png"
note "no Ray dashboard: the server's /metrics (step 33) and these logs"

step 39 "resume from a checkpoint: --resume-from-checkpoint" typed
reuse_step 14
typed 'RESUME_CKPT=$CKPT_SAVE_DIR/checkpoint-2; MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 bash methods/binary-rl/run_qwen3_7b.sh --resume-from-checkpoint $RESUME_CKPT --max-steps 4' \
  'resumed from .*checkpoint-2' 'stopped after step 4'
expect_file "$CKPT_SAVE_DIR/checkpoint-4"

step 40 "evaluate the trained checkpoint: --eval-tasks conversation,coding,tool-use" typed
reuse_step 14
SHOW=7 typed 'openclaw-host eval --model-path $CKPT_SAVE_DIR/checkpoint-latest --eval-tasks "conversation,coding,tool-use" --png ./eval.png' \
  '^conversation +preference, no instruction' '^coding ' '^tool-use '
expect_file "$S/eval.png"

step 41 "out of memory: LoRA rank 32, PARALLEL_ENVS=8, --offload-optimizer-state" refused
typed 'export LORA_ARGS="--use-lora --lora-rank 32"; MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --max-steps 1' \
  'stopped after step 1'
expect_file "$S/checkpoints/checkpoint-1/adapter_model.safetensors"
typed 'ENV_TYPE=toolcall PARALLEL_ENVS=8 MODEL_PATH=/path/to/agent/model CKPT_SAVE_DIR=./checkpoints/env RL_BUFFER_DIR=./rl_buffer-env bash envs/toolcall/run_toolcall_rl.sh --max-steps 1 --rollout-batch-size 4 --num-rollouts-per-prompt 2 --max-episode-steps 1 --default-max-tokens 16 --env-eval-interval 0' \
  '^step +1 .*episodes \(last [1-9]' 'stopped after step 1'
refused 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --offload-optimizer-state' \
  'offload_optimizer_state' 'not supported yet'

step 42 "async loops behind: smaller ROLLOUT_ARGS, --num-judge-workers" typed
typed 'export ROLLOUT_ARGS="--rollout-batch-size 16"; MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --num-judge-workers 4 --max-steps 1' \
  '^step +1 .* 16 samples'

step 43 "PRM scores near 0.5: next_state, the judge prompt, --majority-vote-n 7" typed
typed 'MODEL_PATH=/path/to/base/model OPENCLAW_JUDGE=rule OPENCLAW_SIMULATE_USERS=8 CKPT_SAVE_DIR=./checkpoints bash methods/binary-rl/run_qwen3_7b.sh --majority-vote-n 7 --max-steps 1' \
  'judged [0-9]+: next state' 'stopped after step 1'
typed 'openclaw-host buffer export --rl-buffer-dir ./rl_buffer --out ./data/next-states.jsonl' 'wrote [0-9]+ sessions'
expect_in "$WORK/data/next-states.jsonl" '"next_state":\{"role":"user"'

step 44 "SGLang will not start: pin its version, or --backend vllm" refused
refused 'openclaw-host serve --model-path /path/to/base/model --backend vllm' 'backend' 'vllm'

step 45 "Ray job fails: ray start --head, ray job submit" nothing
nothing "no Ray: a launch script is the whole job (\`bash methods/binary-rl/run_qwen3_7b.sh\`, step 10)"

# --- summary -------------------------------------------------------------------------------------
echo
if [[ ${#SKIPPED[@]} -gt 0 ]]; then
  echo "skipped (counted as nothing to type): step ${SKIPPED[*]}"
fi
status=0
if [[ ${#FAILS[@]} -gt 0 ]]; then
  echo "FAILED checks (${#FAILS[@]}); the scratch directory is kept: $WORK"
  printf '  %s\n' "${FAILS[@]}"
  status=1
elif [[ $made_work == 1 && "${KEEP_WORK:-0}" != 1 ]]; then
  rm -rf "$WORK"
else
  echo "scratch directory: $WORK"
fi
echo "migrating: $n_typed steps typed, $n_refused refused as documented, $n_nothing nothing to type"
exit $status
