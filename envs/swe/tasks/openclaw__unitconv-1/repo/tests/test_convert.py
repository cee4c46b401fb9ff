import pytest

from unitconv import IncompatibleUnits, convert, convert_text, parse_quantity


def test_length():
    assert convert(5, "km", "mi") == pytest.approx(3.10686, rel=1e-5)
    assert convert(12, "in", "ft") == pytest.approx(1.0)
    assert convert(1, "mi", "m") == pytest.approx(1609.344)


def test_mass_and_time():
    assert convert(1, "lb", "g") == pytest.approx(453.59237)
    assert convert(90, "min", "h") == pytest.approx(1.5)
    assert convert(2, "d", "s") == 172800


def test_celsius_and_kelvin():
    assert convert(0, "C", "K") == pytest.approx(273.15)
    assert convert(300, "K", "C") == pytest.approx(26.85)


def test_from_fahrenheit():
    assert convert(212, "F", "C") == pytest.approx(100.0)
    assert convert(98.6, "°F", "celsius") == pytest.approx(37.0)
    assert convert(32, "F", "K") == pytest.approx(273.15)


def test_same_unit_and_errors():
    assert convert(3, "kg", "kg") == 3.0
    with pytest.raises(IncompatibleUnits):
        convert(1, "kg", "m")
    with pytest.raises(KeyError):
        convert(1, "furlong", "m")


def test_parse_quantity():
    assert parse_quantity(" 12.5 km ") == (12.5, "km")
    assert parse_quantity("-40°C") == (-40.0, "°C")
    assert convert_text("12 lb", "kg") == pytest.approx(5.44310844)
    with pytest.raises(ValueError):
        parse_quantity("twelve km")
