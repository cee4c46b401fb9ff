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

import urllib.error
import urllib.request


@pytest.fixture(scope="module")
def kv():
    p = start(["python3", "/app/kv.py"], 18556)
    yield "http://127.0.0.1:18556"
    p.kill()


def put(url, body):
    r = urllib.request.urlopen(urllib.request.Request(url, data=body, method="PUT"), timeout=5)
    return r.status


def test_put_then_get(kv):
    assert put(kv + "/color", b"blue") == 201
    assert urllib.request.urlopen(kv + "/color", timeout=5).read() == b"blue"
    assert put(kv + "/color", b"green") == 201
    assert urllib.request.urlopen(kv + "/color", timeout=5).read() == b"green"


def test_missing_key_404(kv):
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(kv + "/never", timeout=5)
    assert e.value.code == 404
