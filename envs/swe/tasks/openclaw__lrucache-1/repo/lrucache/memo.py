import functools

from .cache import LRUCache

_MISSING = object()


def memoize(maxsize=128):
    """Caches a function's results by its arguments (which must be hashable)."""

    def decorate(fn):
        cache = LRUCache(maxsize)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            key = (args, tuple(sorted(kwargs.items())))
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = fn(*args, **kwargs)
                cache.put(key, value)
            return value

        wrapper.cache = cache
        return wrapper

    return decorate
