import json


def test_counts():
    with open("/app/errors.json") as f:
        assert json.load(f) == {"E101": 3, "E202": 1, "E303": 2}
