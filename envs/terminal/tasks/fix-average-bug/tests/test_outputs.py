import sys

import pytest

sys.path.insert(0, "/app")


def test_average():
    import stats
    assert stats.average([1, 2, 3]) == 2
    assert stats.average([5]) == 5
    assert stats.average([1.5, 2.5]) == 2.0


def test_empty_raises():
    import stats
    assert stats.average([2, 4, 6, 8]) == 5
    with pytest.raises(ValueError):
        stats.average([])
    assert stats.median([3, 1, 2]) == 2
