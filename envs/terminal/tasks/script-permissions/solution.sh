#!/bin/bash
# The reference solution.
cd /app/scripts && chmod u+x ./*.sh && for f in *; do case "$f" in *.sh) ;; *) chmod a-x -- "$f";; esac; done
