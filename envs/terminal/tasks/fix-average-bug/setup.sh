#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/stats.py <<'END'
def average(values):
    if not values:
        raise ValueError("average of nothing")
    return sum(values) / (len(values) - 1)


def median(values):
    s = sorted(values)
    return s[len(s) // 2]
END
