import os
import subprocess


def make(*args):
    return subprocess.run(["make", "-C", "/app", *args], capture_output=True, text=True, timeout=60)


def test_build_and_run():
    assert make().returncode == 0
    assert subprocess.run(["/app/hello"], capture_output=True, text=True).stdout == "hello from C\n"


def test_clean():
    assert make().returncode == 0
    assert make("clean").returncode == 0
    assert not os.path.exists("/app/hello")
