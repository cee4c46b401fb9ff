#!/bin/bash
# The reference solution.
grep -v '^$' /app/poem.txt | awk '{print NR ": " $0}' > /app/numbered.txt
