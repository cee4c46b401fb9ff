"""Inclusive date ranges."""

from .parse import parse_date, parse_range
from .range import DateRange

__all__ = ["DateRange", "parse_date", "parse_range"]
