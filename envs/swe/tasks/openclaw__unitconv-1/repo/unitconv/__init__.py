"""Unit conversion."""

from .convert import IncompatibleUnits, convert, convert_text, parse_quantity
from .units import UNITS, Unit, get_unit

__all__ = ["IncompatibleUnits", "UNITS", "Unit", "convert", "convert_text", "get_unit",
           "parse_quantity"]
