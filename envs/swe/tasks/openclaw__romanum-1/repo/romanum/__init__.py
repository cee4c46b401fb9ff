"""Roman numerals."""

from .codec import MAX_VALUE, MIN_VALUE, from_roman, to_roman
from .formatting import enumerate_roman, roman_year

__all__ = ["MAX_VALUE", "MIN_VALUE", "enumerate_roman", "from_roman", "roman_year", "to_roman"]
