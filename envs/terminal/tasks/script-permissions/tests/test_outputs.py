import os
from pathlib import Path

S = Path("/app/scripts")


def test_shell_scripts_executable():
    for f in ["build.sh", "deploy.sh", "test.sh"]:
        assert os.access(S / f, os.X_OK), f


def test_others_not_executable():
    for f in ["README", "config.json", "notes.txt"]:
        assert not os.access(S / f, os.X_OK), f
