import os
from pathlib import Path


def test_link_points_to_newest():
    assert os.path.islink("/app/current")
    assert os.readlink("/app/current") == "releases/v3"


def test_link_resolves():
    assert (Path("/app/current") / "VERSION").read_text().strip() == "3"
