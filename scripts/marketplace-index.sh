#!/usr/bin/env bash
# Writes marketplace/index.toml: one record for each method, environment and example of this
# repository, pointing at its folder in the last commit that changed it, with the checksum of
# that folder. Run it after committing a change to a plugin, then commit the index: CI
# (`host/cli/tests/plugin_install.rs`) checks every record against the committed folders.
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
    # The last commit that changed the folder: its tree is the folder's now.
    rev=$(git log -1 --format=%H -- "$dir")
    "$host" plugins package "$dir" --git "$url" --rev "$rev" \
        --index-file "$index" "${key[@]}"
done
