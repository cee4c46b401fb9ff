import subprocess


def run(*args):
    return subprocess.run(["python3", "/app/greet.py", *args], capture_output=True, text=True, timeout=10)


def test_times():
    r = run("--name", "Ada", "--times", "3")
    assert r.returncode == 0 and r.stdout == "Hello, Ada!\nHello, Ada!\nHello, Ada!\n"


def test_default_once():
    assert run("--name", "Bo").stdout == "Hello, Bo!\n"


def test_name_required():
    r = run("--times", "2")
    assert r.returncode != 0 and "Hello" not in r.stdout
    assert run("--name", "x").returncode == 0
