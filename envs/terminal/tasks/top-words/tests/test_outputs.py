from pathlib import Path


def test_top_three():
    assert Path("/app/top3.txt").read_text().splitlines() == ["data 6", "the 4", "models 3"]
