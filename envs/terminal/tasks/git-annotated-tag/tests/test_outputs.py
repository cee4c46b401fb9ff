import subprocess


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()



def test_annotated_tag_on_head():
    assert git("cat-file", "-t", "v1.0") == "tag"
    assert git("rev-parse", "v1.0^{commit}") == git("rev-parse", "HEAD")
    assert git("tag", "-l", "--format=%(contents:subject)", "v1.0") == "Release 1.0"
