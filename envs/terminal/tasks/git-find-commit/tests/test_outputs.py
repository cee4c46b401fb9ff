import subprocess


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


from pathlib import Path


def test_hash():
    want = git("log", "--format=%H", "--grep=fix bug")
    assert len(want) == 40
    assert Path("/app/commit.txt").read_text().strip() == want
