#!/bin/bash
# The reference solution.
sed 's/^[[:space:]]*//; s/[[:space:]]*$//' /app/names.txt | grep -v '^$' | LC_ALL=C sort -u > /app/unique.txt
