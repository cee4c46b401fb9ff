import subprocess


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()



def test_branch_has_the_commit():
    assert git("log", "-1", "--format=%s", "feature/login") == "Add login"
    assert git("show", "feature/login:login.py") == "def login(): return True"
    assert git("rev-parse", "feature/login~1") == git("rev-parse", "main")


def test_main_unchanged_and_branch_checked_out():
    assert git("rev-list", "--count", "main") == "1"
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "feature/login"
