#!/bin/bash
# The reference solution.
jq -r '.[] | select(.active) | .email' /app/users.json | sort > /app/emails.txt
