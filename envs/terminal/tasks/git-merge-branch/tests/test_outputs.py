import subprocess


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()



def test_merge_commit():
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert git("log", "-1", "--format=%s") == "Merge docs"
    parents = git("log", "-1", "--format=%P").split()
    assert len(parents) == 2
    assert git("rev-parse", "docs") in parents


def test_docs_file_on_main():
    assert git("show", "main:GUIDE.md") == "# Guide"
