#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/users.json <<'END'
[
  {"name": "Zed", "email": "zed@example.com", "active": true},
  {"name": "Cy", "email": "cy@example.com", "active": false},
  {"name": "Ann", "email": "ann@example.com", "active": true},
  {"name": "Di", "email": "di@example.com", "active": false},
  {"name": "Bo", "email": "bo@example.com", "active": true}
]
END
