#!/bin/bash
# The reference solution.
cd /app/repo && git checkout -qb feature/login && echo 'def login(): return True' > login.py && git add login.py && git commit -qm 'Add login'
