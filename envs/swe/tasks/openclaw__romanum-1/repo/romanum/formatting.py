from .codec import to_roman


def enumerate_roman(items, start=1, *, lowercase=False, separator=". "):
    """Prefixes each item with its Roman ordinal: ['I. a', 'II. b', ...]."""
    lines = []
    for number, item in enumerate(items, start=start):
        numeral = to_roman(number)
        if lowercase:
            numeral = numeral.lower()
        lines.append(f"{numeral}{separator}{item}")
    return lines


def roman_year(year):
    """A year as on a title card or a cornerstone: 'MMXXIV'."""
    return to_roman(year)
