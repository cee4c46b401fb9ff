#!/usr/bin/env bash
# Writes marketplace/index.toml: one record for each method, environment and example of this
# repository, pointing at its folder in the repository on `main`, with the checksum of its tree
# in the commit `main` names. Run it after committing a change to a plugin, then commit the index:
# CI (`host/cli/tests/plugin_install.rs`) checks every record against the committed trees.
#
#   scripts/marketplace-index.sh [--key FILE]    (--key signs every record)
set -euo pipefail
cd "$(dirname "$0")/.."
key=()
if [[ "${1:-}" == "--key" ]]; then key=(--key "$2"); fi

url="https://github.com/openclaw-host/openclaw-host.git"
index="marketplace/index.toml"
mkdir -p marketplace
rm -f "$index"
# OPENCLAW_HOST: a built binary to use instead of building the release one.
host="${OPENCLAW_HOST:-}"
if [[ -z "$host" ]]; then
    cargo build --release -p openclaw-host
    host=./target/release/openclaw-host
fi
for dir in methods/binary-rl methods/opd methods/combine \
    envs/toolcall envs/terminal envs/swe envs/gui \
    examples/my-method examples/my-rollout examples/my-generate; do
    "$host" plugins package "$dir" --git "$url" --rev main \
        --index-file "$index" "${key[@]}"
done
