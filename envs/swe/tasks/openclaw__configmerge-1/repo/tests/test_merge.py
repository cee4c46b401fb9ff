import pytest

from configmerge import DELETE, merge


def test_later_layers_win_and_nested_dicts_merge():
    defaults = {"db": {"host": "localhost", "port": 5432}, "debug": False}
    override = {"db": {"host": "db.internal"}, "debug": True}
    assert merge(defaults, override) == {
        "db": {"host": "db.internal", "port": 5432}, "debug": True,
    }


def test_lists_and_scalars_are_replaced():
    assert merge({"plugins": ["a", "b"]}, {"plugins": ["c"]}) == {"plugins": ["c"]}
    assert merge({"db": {"host": "x"}}, {"db": "sqlite:///app.db"}) == {"db": "sqlite:///app.db"}
    assert merge({"db": "sqlite"}, {"db": {"host": "x"}}) == {"db": {"host": "x"}}


def test_delete_removes_keys():
    assert merge({"a": 1, "b": {"c": 2, "d": 3}}, {"a": DELETE, "b": {"c": DELETE}}) == {
        "b": {"d": 3},
    }


def test_no_layers_and_bad_layers():
    assert merge() == {}
    with pytest.raises(TypeError):
        merge({"a": 1}, ["not", "a", "mapping"])
