#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/essay.txt <<'END'
Data, data, DATA! The models learn from the data.
Models need data; the models fail without the data.
END
