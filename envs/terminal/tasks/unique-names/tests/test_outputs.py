from pathlib import Path


def test_unique_sorted():
    assert Path("/app/unique.txt").read_text().splitlines() == ["Alice", "Bob", "Carol", "Dave"]
