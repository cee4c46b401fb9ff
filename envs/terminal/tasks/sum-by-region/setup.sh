#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/sales.csv <<'END'
region,product,amount
north,apples,100
south,pears,20
east,apples,300
west,plums,1000
north,pears,50
east,plums,70
south,apples,25
west,pears,5
END
