#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
mkdir -p /app/photos && cd /app/photos
echo sunset > a.jpg; echo beach > b.jpg; echo sunset > c.jpg
echo forest > d.jpg; echo beach > e.jpg; echo forest > f.jpg
