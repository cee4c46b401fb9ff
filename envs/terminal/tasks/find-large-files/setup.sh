#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
mkdir -p /app/data/sub/deeper
head -c 500 /dev/zero > /app/data/small.txt
head -c 1000 /dev/zero > /app/data/exact.txt
head -c 1001 /dev/zero > /app/data/big.bin
head -c 5000 /dev/zero > /app/data/sub/huge.log
head -c 20 /dev/zero > /app/data/sub/tiny.log
head -c 3000 /dev/zero > /app/data/sub/deeper/z.dat
