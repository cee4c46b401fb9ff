import re

from .units import get_unit

_QUANTITY = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(\S+)\s*$")


class IncompatibleUnits(ValueError):
    pass


def convert(value, from_unit, to_unit):
    """value in from_unit, expressed in to_unit."""
    src, dst = get_unit(from_unit), get_unit(to_unit)
    if src.dimension != dst.dimension:
        raise IncompatibleUnits(f"cannot convert {src.dimension} to {dst.dimension}")
    if src == dst:
        return float(value)
    return dst.from_base(src.to_base(value))


def parse_quantity(text):
    """'12.5 km' -> (12.5, 'km')."""
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"not a quantity: {text!r}")
    value, symbol = m.groups()
    get_unit(symbol)
    return float(value), symbol


def convert_text(text, to_unit):
    value, symbol = parse_quantity(text)
    return convert(value, symbol, to_unit)
