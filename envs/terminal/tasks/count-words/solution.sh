#!/bin/bash
# The reference solution.
wc -w < /app/text.txt | tr -d ' ' > /app/count.txt
