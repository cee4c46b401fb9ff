#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
mkdir -p '/app/code/pkg/sub dir'
printf 'a = 1\nb = 2\nc = 3\n' > /app/code/main.py
printf 'x\n' > /app/code/notes.txt
printf 'import os\n' > /app/code/setup.py
printf '1\n2\n' > /app/code/pkg/mod.py
printf '1\n2\n3\n' > '/app/code/pkg/sub dir/my file.py'
