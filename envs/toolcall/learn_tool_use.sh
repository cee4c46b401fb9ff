#!/usr/bin/env bash
# A learning demonstration on a CPU with nothing downloaded: a tiny model learns, by GRPO on
# groups of episodes of the tool-call environment, to use the `code_interpreter` tool for a
# task it cannot do in its head (multiplying two 2-digit numbers), and its held-out solve rate
# rises from below 0.3 to above 0.8.
#
# 1. Problems: 2,000 products of two numbers in 11..99 (problems.jsonl); the environment puts
#    every 5th in its `eval` split, which nothing below trains on.
# 2. A tiny Qwen3 (`init-model`, about 1M parameters) with a byte-level BPE tokenizer trained
#    on the conversations, and a ChatML template whose tools section writes only the tools'
#    names (the instruction says how to call it; a 128-wide model does not need 150 tokens of
#    schema), the same in SFT and in the episodes.
# 3. Cold start, as ReTool does: SFT on worked examples that call the tool
#    (`<code>print(a * b)</code>`, the interpreter's answer, `Answer: \boxed{…}`), then a short
#    SFT on a mix where 80% of the answers are guesses, so the model mostly guesses (its greedy
#    held-out solve rate starts at 0) but knows how to use the tool.
# 4. `openclaw-host run --env toolcall`: groups of 8 episodes per problem, ±1 by the last boxed
#    answer, one sample per agent step with the group-normalised advantage; every
#    `EVAL_EVERY` steps one greedy episode on each of `EVAL_TASKS` held-out problems. The curve
#    (held-out solve rate and tool calls per step) is OUT/rl/logs/learning_curve.png.
#
# Variables: OUT (default ./tool-learning), SEED, SFT_STEPS (600), MIX_STEPS (100), RL_STEPS
# (30), EVAL_EVERY (5), EVAL_TASKS (60), OPENCLAW_HOST_BIN (default target/release/openclaw-host,
# built when missing). Needs bubblewrap, python3 (the interpreter, in the sandbox) and jq.
set -euo pipefail
ENV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$ENV_DIR/../.." && pwd)"
BIN="${OPENCLAW_HOST_BIN:-$ROOT/target/release/openclaw-host}"
OUT="$(realpath -m "${OUT:-$PWD/tool-learning}")"
SEED="${SEED:-7}"
SFT_STEPS="${SFT_STEPS:-600}"
MIX_STEPS="${MIX_STEPS:-100}"
RL_STEPS="${RL_STEPS:-30}"
EVAL_EVERY="${EVAL_EVERY:-5}"
EVAL_TASKS="${EVAL_TASKS:-60}"
command -v jq >/dev/null || { echo "learn_tool_use.sh needs jq: apt-get install jq" >&2; exit 1; }
if [[ ! -x "$BIN" ]]; then
  (cd "$ROOT" && cargo build --release -p openclaw-host)
fi
# OUT is made anew; a folder that is not an earlier run's is never removed.
if [[ -e "$OUT" && -n "$(ls -A "$OUT")" && ! -e "$OUT/.learn_tool_use" ]]; then
  echo "learn_tool_use.sh: $OUT exists and is not an earlier run's output; give another OUT" >&2
  exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT"
touch "$OUT/.learn_tool_use"
cd "$OUT"

# Problems, and SFT conversations (N of them, a share SHARE calling the tool) from the train
# split only. The prompt and the interpreter's reply are the environment's, byte for byte.
make_data() { # SEED N SHARE FILE
  awk -v seed="$1" -v ns="$2" -v share="$3" -v file="$4" -v np=2000 'BEGIN {
    srand(seed);
    # The problems are drawn from a fixed seed, so every call sees the same ones.
    srand(1);
    n = 0;
    while (n < np) {
      a = 11 + int(rand() * 89); b = 11 + int(rand() * 89);
      if ((a "x" b) in seen) continue;
      seen[a "x" b] = 1; A[n] = a; B[n] = b; n++;
      if (file == "problems") printf "{\"question\": \"What is %d times %d?\", \"answer\": \"%d\"}\n", a, b, a * b > "problems.jsonl";
    }
    if (file == "problems") exit;
    srand(seed);
    # The template writes each tool by name (its tools section), in SFT as in the episodes.
    tools = "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"code_interpreter\"}}]";
    pre = "Solve the problem below. You can run Python with the `code_interpreter` tool; what the code prints comes back to you. Finish with the final answer as `Answer: \\\\boxed{<answer>}`.\\n\\nProblem: ";
    for (i = 0; i < ns; i++) {
      do { j = int(rand() * np) } while (j % 5 == 4);
      a = A[j]; b = B[j]; p = a * b;
      user = "{\"role\": \"user\", \"content\": \"" pre "What is " a " times " b "?\"}";
      if (rand() < share) {
        call = "{\"role\": \"assistant\", \"content\": \"<code>print(" a " * " b ")</code>\"}";
        tool = "{\"role\": \"tool\", \"name\": \"code_interpreter\", \"content\": \"<interpreter>\\n" p "\\n\\n</interpreter>\"}";
        ans = "{\"role\": \"assistant\", \"content\": \"Answer: \\\\boxed{" p "}\"}";
        printf "{\"messages\": [%s, %s, %s, %s], %s}\n", user, call, tool, ans, tools > file;
      } else {
        ans = "{\"role\": \"assistant\", \"content\": \"Answer: \\\\boxed{" (121 + int(rand() * 9680)) "}\"}";
        printf "{\"messages\": [%s, %s], %s}\n", user, ans, tools > file;
      }
    }
  }'
}
make_data 0 0 0 problems
make_data "$SEED" $((SFT_STEPS * 32)) 1.0 tool.jsonl
make_data $((SEED + 1)) $((MIX_STEPS * 32)) 0.2 mix.jsonl
# The tokenizer's corpus: the conversations' texts, unescaped.
sed -e 's/\\n/\n/g' -e 's/\\"/"/g' -e 's/\\\\/\\/g' tool.jsonl mix.jsonl > corpus.txt
cat > env.toml <<EOF
[env]
data_path = "$OUT/problems.jsonl"
max_turns = 3
EOF

echo "== a tiny model and its tokenizer"
"$BIN" init-model --out model --train-text corpus.txt --vocab-size 1024 --seed "$SEED"
jq --arg t "{%- if tools %}{{- '<|im_start|>system\nTools:' }}{%- for t in tools %}{{- ' ' + t.function.name }}{%- endfor %}{{- '<|im_end|>\n' }}{%- endif %}{%- for m in messages %}{{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}" \
  '.chat_template = $t' model/tokenizer_config.json > model/tc.json
mv model/tc.json model/tokenizer_config.json

echo "== cold start: $SFT_STEPS SFT steps on worked examples, then $MIX_STEPS on mostly guesses"
"$BIN" sft --model-path model --data-path tool.jsonl --max-steps "$SFT_STEPS" --batch-size 32 \
  --lr 3e-3 --lr-warmup-steps 40 --lr-schedule cosine --min-lr 3e-4 --max-len 512 \
  --save-dir sft --log-dir sft/logs 2>&1 | tail -n 2
"$BIN" sft --model-path sft/checkpoint-latest --data-path mix.jsonl --max-steps "$MIX_STEPS" \
  --batch-size 32 --lr 3e-4 --lr-warmup-steps 10 --max-len 512 \
  --save-dir mix --log-dir mix/logs 2>&1 | tail -n 2

echo "== GRPO on the tool-call environment: $RL_STEPS steps"
"$BIN" run --plugin "$ROOT/methods/binary-rl" --env "$ENV_DIR" --env-config env.toml \
  --model-path mix/checkpoint-latest --num-rollouts-per-prompt 8 --rollout-batch-size 32 \
  --parallel-envs 8 --max-episode-steps 3 --default-max-tokens 24 --lr 2e-4 --max-staleness 4 \
  --max-steps "$RL_STEPS" --env-eval-interval "$EVAL_EVERY" --env-eval-tasks "$EVAL_TASKS" \
  --rl-buffer-dir rl/buffer --save-dir rl/checkpoints --log-dir rl/logs --port 0 --seed "$SEED"
