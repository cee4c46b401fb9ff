#!/bin/bash
# The reference solution.
find /app/data -type f -size +1000c -printf '%f\n' | sort > /app/large.txt
