from pathlib import Path


def test_totals():
    assert Path("/app/totals.csv").read_text().splitlines() == [
        "region,total",
        "east,370",
        "north,150",
        "south,45",
        "west,1005",
    ]
