import subprocess


def loc(d):
    return subprocess.run(["/app/pyloc.sh", d], capture_output=True, text=True, timeout=10).stdout.strip()


def test_tree():
    assert loc("/app/code") == "9"


def test_subfolder():
    assert loc("/app/code/pkg") == "5"
