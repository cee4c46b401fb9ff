#!/bin/bash
# The reference solution.
grep -o 'ERROR E[0-9]*' /app/server.log | awk '{print $2}' | sort | uniq -c | awk 'BEGIN{printf "{"} {printf "%s\"%s\": %d", (NR>1?", ":""), $2, $1} END{print "}"}' > /app/errors.json
