#!/bin/bash
# The reference solution.
printf 'hello: hello.c\n\tcc -o hello hello.c\n\nclean:\n\trm -f hello\n' > /app/Makefile
