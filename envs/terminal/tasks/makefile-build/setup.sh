#!/bin/bash
# Prepares /app (in place of the Dockerfile).
set -e
cat > /app/hello.c <<'END'
#include <stdio.h>
int main(void) { puts("hello from C"); return 0; }
END
