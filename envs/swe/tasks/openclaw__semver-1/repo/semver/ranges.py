import operator

from .version import Version

_OPERATORS = [
    (">=", operator.ge), ("<=", operator.le), ("!=", operator.ne),
    ("==", operator.eq), (">", operator.gt), ("<", operator.lt), ("=", operator.eq),
]


def _comparator(text):
    for symbol, op in _OPERATORS:
        if text.startswith(symbol):
            return op, Version.parse(text[len(symbol):])
    return operator.eq, Version.parse(text)


def matches(version, spec):
    """Whether version meets every space-separated comparator in spec, e.g. '>=1.2.0 <2.0.0'."""
    if isinstance(version, str):
        version = Version.parse(version)
    comparators = [_comparator(part) for part in spec.split()]
    if not comparators:
        raise ValueError("empty range")
    return all(op(version, bound) for op, bound in comparators)


def max_satisfying(versions, spec):
    """The highest of the version strings that matches spec, or None."""
    candidates = [Version.parse(v) for v in versions]
    best = max((v for v in candidates if matches(v, spec)), default=None)
    return None if best is None else str(best)
