from romanum import enumerate_roman, roman_year


def test_enumerate_roman():
    assert enumerate_roman(["Intro", "Usage", "API"]) == ["I. Intro", "II. Usage", "III. API"]
    assert enumerate_roman(["x"], start=4, lowercase=True, separator=") ") == ["iv) x"]


def test_roman_year():
    assert roman_year(1999) == "MCMXCIX"
