#!/bin/bash
# The reference solution.
cd /app/repo && git checkout -- app.py
