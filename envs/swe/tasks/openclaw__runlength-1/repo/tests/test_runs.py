import pytest

from runlength import expand, runs


def test_runs():
    assert list(runs("aaabcc")) == [("a", 3), ("b", 1), ("c", 2)]
    assert list(runs([1, 1, 2])) == [(1, 2), (2, 1)]
    assert list(runs("")) == []


def test_expand():
    assert expand([("x", 2), ("y", 1)]) == ["x", "x", "y"]
    with pytest.raises(ValueError):
        expand([("x", 0)])
