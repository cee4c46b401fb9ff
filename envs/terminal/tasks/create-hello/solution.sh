#!/bin/bash
echo 'Hello, world!' > /app/hello.txt
