from tokenbucket import ManualClock, RateLimiter


def test_keys_have_separate_buckets():
    limiter = RateLimiter(rate=1, capacity=2, clock=ManualClock())
    assert limiter.allow("a") and limiter.allow("a")
    assert not limiter.allow("a")
    assert limiter.allow("b")
    assert len(limiter) == 2


def test_retry_after_and_reset():
    clock = ManualClock()
    limiter = RateLimiter(rate=0.5, capacity=1, clock=clock)
    assert limiter.allow("k")
    assert limiter.retry_after("k") == 2.0
    limiter.reset("k")
    assert limiter.allow("k")
