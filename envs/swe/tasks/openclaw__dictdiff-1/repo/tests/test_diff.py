from dictdiff import Change, apply, diff, summary

OLD = {"name": "svc", "replicas": 2, "env": {"LOG": "info", "TZ": "UTC"}, "tags": ["a"]}
NEW = {"name": "svc", "replicas": 3, "env": {"LOG": "debug", "REGION": "eu"}, "owner": "ops"}


def test_identical_documents():
    assert diff(OLD, dict(OLD)) == []


def test_add_remove_change():
    assert diff(OLD, NEW) == [
        Change("change", ("env", "LOG"), old="info", new="debug"),
        Change("add", ("env", "REGION"), new="eu"),
        Change("remove", ("env", "TZ"), old="UTC"),
        Change("add", ("owner",), new="ops"),
        Change("change", ("replicas",), old=2, new=3),
        Change("remove", ("tags",), old=["a"]),
    ]


def test_falsy_values_are_values():
    assert diff({"n": 1, "s": "x", "b": True}, {"n": 0, "s": "", "b": False}) == [
        Change("change", ("b",), old=True, new=False),
        Change("change", ("n",), old=1, new=0),
        Change("change", ("s",), old="x", new=""),
    ]
    assert diff({"flag": 1}, {"flag": True}) == [Change("change", ("flag",), old=1, new=True)]


def test_apply_round_trip():
    assert apply(OLD, diff(OLD, NEW)) == NEW
    assert apply(NEW, diff(NEW, OLD)) == OLD
    assert OLD["env"] == {"LOG": "info", "TZ": "UTC"}


def test_summary():
    assert summary(diff({"a": {"b": 1}, "c": 2}, {"a": {"b": 2}, "d": [1]})) == [
        "~ a.b: 1 -> 2", "- c: 2", "+ d: [1]",
    ]
