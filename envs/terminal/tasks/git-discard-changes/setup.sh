#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
mkdir -p /app/repo && cd /app/repo && git init -q -b main
echo 'print("app v1")' > app.py && git add app.py && git commit -qm 'Add app'
echo 'raise SystemExit("broken")' > app.py
echo 'keep me' > notes.txt
