import pytest

from runlength import compression_ratio, decode, encode


def test_encode():
    assert encode("aaabcc") == "3a1b2c"
    assert encode("") == ""
    assert encode("W" * 15) == "15W"


def test_decode_short_runs():
    assert decode("3a1b2c") == "aaabcc"
    assert decode("9 ") == " " * 9


def test_round_trip_short_runs():
    for text in ["abc", "aabbbcccc", "  --==  ", "xyzzy"]:
        assert decode(encode(text)) == text


def test_rejects_digits_and_malformed_data():
    with pytest.raises(ValueError):
        encode("route 66")
    for data in ["a3", "3", "0a", "3a2"]:
        with pytest.raises(ValueError):
            decode(data)


def test_compression_ratio():
    assert compression_ratio("aaaa") == 0.5
    assert compression_ratio("") == 1.0
