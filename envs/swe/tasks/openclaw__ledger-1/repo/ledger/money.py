import re

_AMOUNT = re.compile(r"\s*([+-])?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?\s*")


def parse_amount(text):
    """'1,234.5' -> 123450 (cents)."""
    m = _AMOUNT.fullmatch(text)
    if not m:
        raise ValueError(f"not an amount: {text!r}")
    sign, whole, fraction = m.groups()
    cents = int(whole.replace(",", "")) * 100 + int((fraction or "0").ljust(2, "0"))
    return -cents if sign == "-" else cents


def format_cents(cents):
    """123450 -> '1,234.50'."""
    sign = "-" if cents < 0 else ""
    whole, rest = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{rest:02d}"
