#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/config.ini <<'END'
[web]
host = localhost
port = 8080

[database]
host = localhost
port = 5432
name = shop
END
