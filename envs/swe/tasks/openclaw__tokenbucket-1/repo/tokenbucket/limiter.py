from .bucket import TokenBucket
from .clock import MonotonicClock


class RateLimiter:
    """One token bucket per key (a client address, a user id, an API token)."""

    def __init__(self, rate, capacity, clock=None):
        self.rate = rate
        self.capacity = capacity
        self._clock = clock or MonotonicClock()
        self._buckets = {}

    def __len__(self):
        return len(self._buckets)

    def bucket(self, key):
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = TokenBucket(self.rate, self.capacity, self._clock)
        return bucket

    def allow(self, key, cost=1):
        return self.bucket(key).try_acquire(cost)

    def retry_after(self, key, cost=1):
        return self.bucket(key).wait_time(cost)

    def reset(self, key):
        self._buckets.pop(key, None)
