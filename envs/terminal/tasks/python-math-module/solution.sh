#!/bin/bash
# The reference solution.
cat > /app/mathutils.py <<'END'
def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


def gcd(a, b):
    while b:
        a, b = b, a % b
    return a
END
