import os
import socket
import subprocess
import time

import pytest


def start(argv, port):
    p = subprocess.Popen(argv, env={**os.environ, "PORT": str(port)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 10
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return p
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.1)
    p.kill()
    raise AssertionError(f"{argv} did not listen on port {port}")



@pytest.fixture(scope="module")
def port():
    p = start(["python3", "/app/echo.py"], 18557)
    yield 18557
    p.kill()


def talk(port, lines):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        f = s.makefile("rwb")
        out = []
        for line in lines:
            f.write(line.encode() + b"\n")
            f.flush()
            out.append(f.readline().decode().rstrip("\n"))
        return out


def test_upper(port):
    assert talk(port, ["hello", "Mixed Case 42"]) == ["HELLO", "MIXED CASE 42"]


def test_several_clients(port):
    assert talk(port, ["one"]) == ["ONE"]
    assert talk(port, ["two"]) == ["TWO"]
