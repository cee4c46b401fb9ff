#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/server.log <<'END'
2024-01-01 10:00:00 INFO started
2024-01-01 10:00:01 ERROR E101 disk full
2024-01-01 10:00:02 WARN slow request
2024-01-01 10:00:03 ERROR E202 timeout
2024-01-01 10:00:04 ERROR E101 disk full
2024-01-01 10:00:05 INFO E999 is not an error
2024-01-01 10:00:06 ERROR E303 bad input
2024-01-01 10:00:07 ERROR E101 disk full
2024-01-01 10:00:08 ERROR E303 bad input
END
