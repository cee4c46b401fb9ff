"""Token-bucket rate limiting."""

from .bucket import TokenBucket
from .clock import ManualClock, MonotonicClock
from .limiter import RateLimiter

__all__ = ["ManualClock", "MonotonicClock", "RateLimiter", "TokenBucket"]
