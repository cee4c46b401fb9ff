#!/bin/bash
# The reference solution.
cd /app/repo && git tag -a v1.0 -m 'Release 1.0'
