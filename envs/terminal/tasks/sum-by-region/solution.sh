#!/bin/bash
# The reference solution.
cd /app && { echo region,total; tail -n +2 sales.csv | awk -F, '{s[$1]+=$3} END {for (r in s) print r "," s[r]}' | sort; } > totals.csv
