from pathlib import Path


def test_numbered():
    assert Path("/app/numbered.txt").read_text().splitlines() == [
        "1: Roses are red,",
        "2: violets are blue,",
        "3: sugar is sweet,",
        "4: and so are you.",
    ]
