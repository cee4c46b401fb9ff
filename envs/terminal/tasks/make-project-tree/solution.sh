#!/bin/bash
# The reference solution.
mkdir -p /app/project/src /app/project/tests /app/project/docs
touch /app/project/src/__init__.py
echo '# project' > /app/project/README.md
