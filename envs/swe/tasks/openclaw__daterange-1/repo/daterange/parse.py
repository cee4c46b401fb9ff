from datetime import date

from .range import DateRange


def parse_date(text):
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a date (YYYY-MM-DD): {text!r}") from None


def parse_range(text):
    """Reads 'YYYY-MM-DD..YYYY-MM-DD' or a single 'YYYY-MM-DD'."""
    if ".." in text:
        start, _, end = text.partition("..")
        return DateRange(parse_date(start), parse_date(end))
    return DateRange.single(parse_date(text))
