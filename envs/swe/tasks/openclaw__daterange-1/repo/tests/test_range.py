from datetime import date

import pytest

from daterange import DateRange, parse_range


def d(day, month=3):
    return date(2024, month, day)


def test_length_counts_both_ends():
    assert len(DateRange(d(1), d(3))) == 3
    assert len(DateRange.single(d(9))) == 1


def test_contains_and_iter():
    r = DateRange(d(30, 1), d(2, 2))
    assert d(31, 1) in r and d(2, 2) in r and d(3, 2) not in r
    assert list(r) == [d(30, 1), d(31, 1), d(1, 2), d(2, 2)]


def test_end_before_start_is_an_error():
    with pytest.raises(ValueError):
        DateRange(d(5), d(4))


def test_overlapping_and_disjoint_ranges():
    a = DateRange(d(1), d(10))
    assert a.overlaps(DateRange(d(5), d(20)))
    assert a.overlaps(DateRange(d(3), d(4)))
    assert not a.overlaps(DateRange(d(12), d(15)))
    assert not DateRange(d(12), d(15)).overlaps(a)


def test_intersection():
    a = DateRange(d(1), d(10))
    assert a.intersection(DateRange(d(5), d(20))) == DateRange(d(5), d(10))
    assert a.intersection(DateRange(d(11), d(20))) is None


def test_months():
    parts = DateRange(date(2023, 12, 30), date(2024, 2, 2)).months()
    assert [str(p) for p in parts] == [
        "2023-12-30..2023-12-31", "2024-01-01..2024-01-31", "2024-02-01..2024-02-02",
    ]


def test_parse_range():
    assert parse_range("2024-03-01..2024-03-05") == DateRange(d(1), d(5))
    assert parse_range(" 2024-03-07 ") == DateRange.single(d(7))
    with pytest.raises(ValueError):
        parse_range("2024-03-01..soon")
