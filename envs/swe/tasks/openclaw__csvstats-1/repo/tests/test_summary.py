import pytest

from csvstats import read_columns, summarize, summarize_column
from csvstats.stats import mean, median

SALES = """region,amount,units
north,120.5,3
south,80,2
north,"1,200",10
east,99.5,1
"""


def test_read_columns_strips_and_skips_blank_lines():
    cols = read_columns("a, b\n 1 ,x\n\n2,y\n")
    assert cols == {"a": ["1", "2"], "b": ["x", "y"]}


def test_read_columns_rejects_ragged_rows():
    with pytest.raises(ValueError, match="line 3"):
        read_columns("a,b\n1,2\n3\n")


def test_numeric_column_summary():
    summary = summarize(SALES)
    assert summary["amount"] == {
        "count": 4, "missing": 0, "min": 80.0, "max": 1200.0, "mean": 375.0, "median": 110.0,
    }


def test_text_column_summary():
    summary = summarize(SALES)
    assert summary["region"] == {"count": 4, "missing": 0, "unique": 3}


def test_missing_text_cells_are_counted():
    assert summarize_column(["a", "", "b", "a"]) == {"count": 3, "missing": 1, "unique": 2}


def test_mean_and_median():
    assert mean([1, 2, 3, 4]) == 2.5
    assert median([5, 1, 3]) == 3
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        median([])
