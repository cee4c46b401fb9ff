#!/usr/bin/env bash
# SmolLM2-135M-Instruct (the shipped GGUF) learns, on a CPU, to answer multiplication problems
# with the tool-call environment's `code_interpreter` instead of guessing.
#
# SmolLM2's chat template has no tools section, so the tools reach it through the system prompt
# (Hermes-style `<tool_call>` blocks; the run's first line says so). Out of the box it never calls
# the tool in the format and never solves a held-out problem (greedy: 0 of 30), so GRPO has no
# reward to work from. As ReTool does, a short cold start comes first:
#
# 1. Problems: 2,000 products of two numbers in 11..99 (problems.jsonl); the environment puts
#    every 5th in its `eval` split, which nothing below trains on.
# 2. Cold start: COLD_STEPS LoRA SFT steps on conversations of the train split where a share
#    COLD_SHARE (0.35) calls the tool and reads its answer, and the rest guess a number. The
#    model learns the format but mostly guesses: its greedy held-out solve rate stays near 0.
# 3. `openclaw-host run --env toolcall`: GRPO with LoRA, groups of 8 episodes per problem, ±1 by
#    the last boxed answer; every EVAL_EVERY steps one greedy episode on each of EVAL_TASKS
#    held-out problems. The curve is OUT/rl/logs/learning_curve.png, the numbers
#    OUT/rl/logs/score.log; a checkpoint every EVAL_EVERY steps (OUT/rl/checkpoints). At this
#    learning rate the policy peaked by step 5 and collapsed past step 12 in a 20-step run
#    (docs/smollm2.md), so RL_STEPS stops at 10 and every evaluated step is kept.
#
# Variables: OUT (default ./smollm2-tool-use), MODEL (default the fetched GGUF,
# scripts/fetch-smollm2.sh), SEED (7), COLD_STEPS (30), COLD_SHARE (0.35), RL_STEPS (10),
# EVAL_EVERY (5), EVAL_TASKS (30), OPENCLAW_HOST_BIN (default target/release/openclaw-host,
# built when missing). Needs bubblewrap, python3 (the interpreter, in the sandbox) and jq.
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$ENV_DIR/../.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
OUT="$(realpath -m "${OUT:-$PWD/smollm2-tool-use}")"
MODEL="$(realpath -m "${MODEL:-$ROOT/.assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}")"
SEED="${SEED:-7}"
COLD_STEPS="${COLD_STEPS:-30}"
COLD_SHARE="${COLD_SHARE:-0.35}"
RL_STEPS="${RL_STEPS:-10}"
EVAL_EVERY="${EVAL_EVERY:-5}"
EVAL_TASKS="${EVAL_TASKS:-30}"
command -v jq >/dev/null || { echo "smollm2_tool_use.sh needs jq: apt-get install jq" >&2; exit 1; }
if [[ ! -f "$MODEL" ]]; then
  echo "smollm2_tool_use.sh: no model at $MODEL: run scripts/fetch-smollm2.sh or set MODEL" >&2
  exit 1
fi
if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host -p openclaw-method-binary-rl \
    -p openclaw-env-toolcall)
fi
# OUT is made anew; a folder that is not an earlier run's is never removed.
if [[ -e "$OUT" && -n "$(ls -A "$OUT")" && ! -e "$OUT/.smollm2_tool_use" ]]; then
  echo "smollm2_tool_use.sh: $OUT exists and is not an earlier run's output; give another OUT" >&2
  exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT"
touch "$OUT/.smollm2_tool_use"
cd "$OUT"
cat > env.toml <<EOF
[env]
data_path = "$OUT/problems.jsonl"
max_turns = 3
EOF

echo "== problems, and the tools exactly as the environment offers them"
python3 - <<'EOF'
import json, random
random.seed(1)
seen = []
while len(seen) < 2000:
    pair = (random.randint(11, 99), random.randint(11, 99))
    if pair not in seen:
        seen.append(pair)
with open("problems.jsonl", "w") as f:
    for a, b in seen:
        f.write(json.dumps({"question": f"What is {a} times {b}?", "answer": str(a * b)}) + "\n")
EOF
# One episode's record carries the tools and the first prompt the environment sends, so the cold
# start's conversations are the episodes' own, byte for byte.
"$BIN" eval --env "$ENV_DIR" --env-config env.toml --model-path "$MODEL" --eval-tasks 1 \
  --samples-per-prompt 1 --max-new-tokens 1 --max-episode-steps 1 --split train \
  --episodes-out probe.jsonl >/dev/null
jq -c '.tools_json | fromjson' probe.jsonl > tools.json
jq -j '.task.instruction' probe.jsonl > instruction.txt

echo "== cold start: $COLD_STEPS LoRA SFT steps, a share $COLD_SHARE of them calling the tool"
SEED="$SEED" COLD_SHARE="$COLD_SHARE" N=$((COLD_STEPS * 32)) python3 - <<'EOF'
import json, os, random
rnd = random.Random(int(os.environ["SEED"]))
share, n = float(os.environ["COLD_SHARE"]), int(os.environ["N"])
tools = json.load(open("tools.json"))
first = open("instruction.txt").read().rstrip("\n")
head = first[: first.index("Problem: ") + len("Problem: ")]
problems = [json.loads(l) for l in open("problems.jsonl")]
with open("cold.jsonl", "w") as f:
    for _ in range(n):
        j = rnd.choice([i for i in range(len(problems)) if i % 5 != 4])
        q = problems[j]["question"]
        a, b = q[len("What is "):-1].split(" times ")
        p = int(a) * int(b)
        msgs = [{"role": "user", "content": head + q}]
        if rnd.random() < share:
            call = {"name": "code_interpreter", "arguments": {"code": f"print({a} * {b})"}}
            msgs += [
                {"role": "assistant", "content": "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"},
                {"role": "tool", "name": "code_interpreter", "content": f"<interpreter>\n{p}\n\n</interpreter>"},
                {"role": "assistant", "content": f"Answer: \\boxed{{{p}}}"},
            ]
        else:
            msgs.append({"role": "assistant", "content": f"Answer: \\boxed{{{rnd.randint(121, 9801)}}}"})
        f.write(json.dumps({"messages": msgs, "tools": tools}) + "\n")
EOF
"$BIN" sft --model-path "$MODEL" --data-path cold.jsonl --use-lora --lora-rank 16 \
  --lora-alpha 32 --max-steps "$COLD_STEPS" --batch-size 8 --lr 1e-3 --lr-warmup-steps 4 \
  --max-len 512 --seed "$SEED" --save-dir cold --log-dir cold/logs 2>&1 | tail -n 2

echo "== GRPO on the tool-call environment: $RL_STEPS steps"
"$BIN" run --plugin "$ROOT/methods/binary-rl" --env "$ENV_DIR" --env-config env.toml \
  --model-path cold/checkpoint-latest --use-lora --lora-rank 16 --lora-alpha 32 \
  --num-rollouts-per-prompt 8 --rollout-batch-size 16 --parallel-envs 8 --max-episode-steps 3 \
  --default-max-tokens 96 --lr 5e-4 --max-staleness 4 --max-steps "$RL_STEPS" \
  --env-eval-interval "$EVAL_EVERY" --env-eval-tasks "$EVAL_TASKS" \
  --save-interval "$EVAL_EVERY" --rl-buffer-dir rl/buffer --save-dir rl/checkpoints \
  --log-dir rl/logs --port 0 --seed "$SEED"
echo "== held-out greedy solve rate by step (rl/logs/score.log; curve: rl/logs/learning_curve.png)"
jq -r 'select(.eval_solve_rate != null) | "step \(.step): \(.eval_solve_rate)"' rl/logs/score.log
