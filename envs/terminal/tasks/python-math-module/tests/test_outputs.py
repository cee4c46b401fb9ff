import sys

sys.path.insert(0, "/app")


def test_is_prime():
    import mathutils
    primes = [n for n in range(-3, 50) if mathutils.is_prime(n)]
    assert primes == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]
    assert mathutils.is_prime(7919) and not mathutils.is_prime(7917)


def test_gcd():
    import mathutils
    assert [mathutils.gcd(12, 18), mathutils.gcd(17, 5), mathutils.gcd(0, 9), mathutils.gcd(0, 0)] == [6, 1, 9, 0]


def test_no_math_import():
    assert "import math" not in open("/app/mathutils.py").read()
