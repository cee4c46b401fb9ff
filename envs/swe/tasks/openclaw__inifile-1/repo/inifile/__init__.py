"""A small INI reader with typed getters."""

from .errors import DuplicateKeyError, IniError, ParseError
from .parser import IniFile, parse

__all__ = ["DuplicateKeyError", "IniError", "IniFile", "ParseError", "parse"]
__version__ = "0.3.1"
