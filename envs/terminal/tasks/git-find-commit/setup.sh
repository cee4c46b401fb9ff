#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
mkdir -p /app/repo && cd /app/repo && git init -q -b main
echo 'print("app v1")' > app.py && git add app.py && git commit -qm 'Add app'
for m in 'Add tests' 'Refactor io' 'fix bug in parser' 'Update docs' 'Release'; do echo "$m" >> log.txt; git add log.txt; git commit -qm "$m"; done
