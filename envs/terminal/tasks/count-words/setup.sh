#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/text.txt <<'END'
The quick brown fox jumps over the lazy dog.
Pack my box with five dozen liquor jugs!
  How vexingly quick   daft zebras jump.
END
