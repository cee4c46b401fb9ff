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

import urllib.request


@pytest.fixture(scope="module")
def site():
    p = start(["/app/serve.sh", "18558"], 18558)
    yield "http://127.0.0.1:18558"
    p.kill()


def test_index(site):
    assert b"<h1>Welcome</h1>" in urllib.request.urlopen(site + "/", timeout=5).read()


def test_file_served(site):
    assert urllib.request.urlopen(site + "/index.html", timeout=5).status == 200
