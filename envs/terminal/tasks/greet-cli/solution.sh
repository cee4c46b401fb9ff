#!/bin/bash
# The reference solution.
cat > /app/greet.py <<'END'
import argparse

p = argparse.ArgumentParser()
p.add_argument("--name", required=True)
p.add_argument("--times", type=int, default=1)
a = p.parse_args()
for _ in range(a.times):
    print(f"Hello, {a.name}!")
END
