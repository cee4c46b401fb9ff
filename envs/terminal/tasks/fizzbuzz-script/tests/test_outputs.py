import subprocess


def run(n):
    return subprocess.run(["/app/fizzbuzz.sh", str(n)], capture_output=True, text=True, timeout=10).stdout.split()


def test_fifteen():
    assert run(15) == ["1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz", "13", "14", "FizzBuzz"]


def test_length():
    out = run(100)
    assert len(out) == 100 and out[99] == "Buzz"
