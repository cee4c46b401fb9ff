from .clock import MonotonicClock


class TokenBucket:
    """Holds up to `capacity` tokens, refilled at `rate` tokens per second.

    A new bucket starts full.
    """

    def __init__(self, rate, capacity, clock=None):
        if rate <= 0:
            raise ValueError("rate must be positive")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self._clock = clock or MonotonicClock()
        self._tokens = self.capacity
        self._updated = self._clock.now()

    def _refill(self):
        now = self._clock.now()
        elapsed = now - self._updated
        if elapsed > 0:
            self._tokens = self._tokens + elapsed * self.rate
            self._updated = now

    @property
    def tokens(self):
        """Tokens available now."""
        self._refill()
        return self._tokens

    def try_acquire(self, cost=1):
        """Takes `cost` tokens if there are enough; says whether it did."""
        if cost > self.capacity:
            raise ValueError(f"cost {cost} exceeds the bucket's capacity {self.capacity:g}")
        self._refill()
        if self._tokens >= cost:
            self._tokens -= cost
            return True
        return False

    def wait_time(self, cost=1):
        """Seconds until `cost` tokens will be available (0 if they are now)."""
        self._refill()
        missing = cost - self._tokens
        return 0.0 if missing <= 0 else missing / self.rate
