import pytest

from ledger import format_cents, parse_amount


def test_parse_amount():
    assert parse_amount("12.34") == 1234
    assert parse_amount("1,234.5") == 123450
    assert parse_amount(" -7 ") == -700
    for text in ["12.345", "1,23", "abc", ""]:
        with pytest.raises(ValueError):
            parse_amount(text)


def test_format_cents():
    assert format_cents(123450) == "1,234.50"
    assert format_cents(-5) == "-0.05"
    assert format_cents(0) == "0.00"
