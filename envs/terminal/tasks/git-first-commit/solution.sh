#!/bin/bash
# The reference solution.
mkdir -p /app/repo && cd /app/repo && git init -q -b main && echo '# Demo' > README.md && git add README.md && git commit -qm 'Initial commit'
