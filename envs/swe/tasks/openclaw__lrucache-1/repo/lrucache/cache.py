from collections import OrderedDict

_MISSING = object()


class LRUCache:
    """A mapping of at most `maxsize` entries; the least recently used is evicted first."""

    def __init__(self, maxsize=128):
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._data = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def get(self, key, default=None):
        """The value for key (marking it as recently used), or default."""
        value = self._data.get(key, _MISSING)
        if value is _MISSING:
            self.misses += 1
            return default
        self.hits += 1
        return value

    def peek(self, key, default=None):
        """The value for key without touching its recency or the counters."""
        return self._data.get(key, default)

    def put(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def pop(self, key, default=None):
        return self._data.pop(key, default)

    def keys(self):
        """Keys from the least to the most recently used."""
        return list(self._data)

    def clear(self):
        self._data.clear()
        self.hits = self.misses = 0
