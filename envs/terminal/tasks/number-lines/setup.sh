#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
printf 'Roses are red,\n\nviolets are blue,\n\n\nsugar is sweet,\nand so are you.\n' > /app/poem.txt
