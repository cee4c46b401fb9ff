from pathlib import Path


def test_reordered():
    assert Path("/app/people.csv").read_text().splitlines() == [
        "city,name,age",
        "Oslo,Ann,31",
        "Lima,Bo,45",
        "Pune,Cy,27",
    ]
