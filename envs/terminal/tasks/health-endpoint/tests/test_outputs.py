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

import json
import urllib.error
import urllib.request


@pytest.fixture(scope="module")
def server():
    p = start(["python3", "/app/server.py"], 18555)
    yield "http://127.0.0.1:18555"
    p.kill()


def test_health(server):
    with urllib.request.urlopen(server + "/health", timeout=5) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        assert json.loads(r.read()) == {"status": "ok"}


def test_other_paths_404(server):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(server + "/nope", timeout=5)
    assert e.value.code == 404
