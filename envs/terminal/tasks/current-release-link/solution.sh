#!/bin/bash
# The reference solution.
ln -sfn releases/v3 /app/current
