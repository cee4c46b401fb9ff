#!/bin/bash
# Runs the task's tests against /app; the environment reads pytest's summary (-rA).
cd /app
python3 -m pytest -p no:cacheprovider "$TEST_DIR/test_outputs.py" -rA
