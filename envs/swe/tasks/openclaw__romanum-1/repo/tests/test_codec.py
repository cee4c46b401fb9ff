import pytest

from romanum import from_roman, to_roman

KNOWN = {
    1: "I", 4: "IV", 9: "IX", 14: "XIV", 40: "XL", 90: "XC", 400: "CD",
    1994: "MCMXCIV", 2024: "MMXXIV", 3888: "MMMDCCCLXXXVIII",
}


def test_known_values():
    for number, numeral in KNOWN.items():
        assert to_roman(number) == numeral
        assert from_roman(numeral) == number


def test_round_trip():
    for number in range(1, 1000):
        assert from_roman(to_roman(number)) == number


def test_parse_is_case_insensitive():
    assert from_roman(" mcmxciv ") == 1994


def test_non_canonical_numerals_are_rejected():
    for text in ["IIII", "VX", "IC", "MMMM", "XM", "", "ABC"]:
        with pytest.raises(ValueError):
            from_roman(text)


def test_out_of_range_and_wrong_type():
    for number in [0, -5, 4000]:
        with pytest.raises(ValueError):
            to_roman(number)
    with pytest.raises(TypeError):
        to_roman(3.0)
    with pytest.raises(TypeError):
        to_roman(True)
