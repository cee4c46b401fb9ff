class IniError(Exception):
    """Base class of the errors raised by inifile."""


class ParseError(IniError):
    def __init__(self, lineno, message):
        super().__init__(f"line {lineno}: {message}")
        self.lineno = lineno


class DuplicateKeyError(ParseError):
    def __init__(self, lineno, key):
        super().__init__(lineno, f"duplicate key {key!r}")
        self.key = key
