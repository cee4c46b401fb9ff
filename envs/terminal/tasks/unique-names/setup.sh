#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
printf 'Carol\n  Alice\nBob  \nAlice\n\nDave\n Bob\nCarol\n' > /app/names.txt
