#!/bin/bash
# The reference solution.
cd /app/repo && git log --format=%H --grep='fix bug' > /app/commit.txt
