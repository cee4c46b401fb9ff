#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
mkdir -p /app/notes
for n in alpha beta gamma 'delta notes' epsilon; do echo "note $n" > "/app/notes/$n.txt"; done
