"""Parsing INI text into an IniFile."""

from .errors import DuplicateKeyError, ParseError

COMMENT_PREFIXES = ("#", ";")
TRUE_WORDS = {"1", "yes", "true", "on"}
FALSE_WORDS = {"0", "no", "false", "off"}

_MISSING = object()


class IniFile:
    """Sections of string values, in the order they were read."""

    def __init__(self):
        self._sections = {}

    def sections(self):
        return list(self._sections)

    def has_section(self, name):
        return name in self._sections

    def items(self, section):
        return dict(self._sections[section])

    def get(self, section, key, default=_MISSING):
        try:
            return self._sections[section][key.lower()]
        except KeyError:
            if default is _MISSING:
                raise KeyError(f"{section}.{key}") from None
            return default

    def getint(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        return value if value is default else int(value)

    def getboolean(self, section, key, default=_MISSING):
        value = self.get(section, key, default)
        if value is default:
            return value
        word = value.lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"{section}.{key}: not a boolean: {value!r}")


def parse(text, *, allow_duplicates=False):
    """Reads INI text. Raises ParseError on malformed lines."""
    ini = IniFile()
    section = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(COMMENT_PREFIXES):
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise ParseError(lineno, "unterminated section header")
            name = line[1:-1].strip()
            if not name:
                raise ParseError(lineno, "empty section name")
            section = ini._sections.setdefault(name, {})
            continue
        if section is None:
            raise ParseError(lineno, "key outside of any section")
        try:
            key, value = line.split("=")
        except ValueError:
            raise ParseError(lineno, "expected 'key = value'") from None
        key = key.strip().lower()
        if not key:
            raise ParseError(lineno, "empty key")
        if key in section and not allow_duplicates:
            raise DuplicateKeyError(lineno, key)
        section[key] = value.strip()
    return ini
