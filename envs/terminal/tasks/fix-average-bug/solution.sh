#!/bin/bash
# The reference solution.
sed -i 's|return sum(values) / (len(values) - 1)|return sum(values) / len(values)|' /app/stats.py
