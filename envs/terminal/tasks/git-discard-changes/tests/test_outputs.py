import subprocess


def git(*args, cwd="/app/repo"):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


from pathlib import Path


def test_app_restored_and_notes_kept():
    assert Path("/app/repo/app.py").read_text() == 'print("app v1")\n'
    assert Path("/app/repo/notes.txt").read_text() == "keep me\n"
    assert git("status", "--porcelain") == "?? notes.txt"
