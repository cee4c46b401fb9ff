import functools
import re

_IDENT = r"[0-9A-Za-z-]+"
_PATTERN = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    rf"(?:-({_IDENT}(?:\.{_IDENT})*))?"
    rf"(?:\+({_IDENT}(?:\.{_IDENT})*))?$"
)


def _prerelease_key(part):
    # Numeric identifiers compare numerically and rank below alphanumeric ones.
    return (0, int(part), "") if part.isdigit() else (1, 0, part)


@functools.total_ordering
class Version:
    def __init__(self, major, minor, patch, prerelease=(), build=()):
        if min(major, minor, patch) < 0:
            raise ValueError("version numbers cannot be negative")
        self.major, self.minor, self.patch = major, minor, patch
        self.prerelease = tuple(prerelease)
        self.build = tuple(build)

    @classmethod
    def parse(cls, text):
        m = _PATTERN.match(text.strip())
        if not m:
            raise ValueError(f"not a semantic version: {text!r}")
        major, minor, patch, pre, build = m.groups()
        return cls(int(major), int(minor), int(patch),
                   pre.split(".") if pre else (), build.split(".") if build else ())

    @property
    def is_prerelease(self):
        return bool(self.prerelease)

    def _key(self):
        return (self.major, self.minor, self.patch,
                tuple(_prerelease_key(p) for p in self.prerelease))

    def __eq__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self):
        return hash(self._key())

    def bump(self, part):
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ValueError(f"unknown part {part!r}")

    def __str__(self):
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self):
        return f"Version({str(self)!r})"
