import subprocess


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()



def test_one_commit():
    assert git("rev-list", "--count", "HEAD") == "1"
    assert git("log", "-1", "--format=%s") == "Initial commit"
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"


def test_readme_committed():
    assert git("show", "HEAD:README.md") == "# Demo"
    assert git("status", "--porcelain") == ""
