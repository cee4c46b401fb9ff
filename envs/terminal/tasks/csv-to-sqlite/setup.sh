#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/products.csv <<'END'
name,price
pen,1.0
mug,7.25
"table, small",120
lamp,19.5
END
