import pytest

from tokenbucket import ManualClock, TokenBucket


def test_new_bucket_is_full():
    bucket = TokenBucket(rate=1, capacity=5, clock=ManualClock())
    assert bucket.tokens == 5


def test_acquire_until_empty():
    bucket = TokenBucket(rate=1, capacity=3, clock=ManualClock())
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_refills_at_rate():
    clock = ManualClock()
    bucket = TokenBucket(rate=2, capacity=5, clock=clock)
    for _ in range(5):
        assert bucket.try_acquire()
    clock.advance(1.0)
    assert bucket.tokens == pytest.approx(2.0)
    assert bucket.try_acquire(2)
    assert not bucket.try_acquire()


def test_wait_time():
    clock = ManualClock()
    bucket = TokenBucket(rate=4, capacity=2, clock=clock)
    assert bucket.wait_time() == 0.0
    bucket.try_acquire(2)
    assert bucket.wait_time() == pytest.approx(0.25)
    clock.advance(0.25)
    assert bucket.try_acquire()


def test_cost_larger_than_capacity_is_refused():
    bucket = TokenBucket(rate=1, capacity=2, clock=ManualClock())
    with pytest.raises(ValueError):
        bucket.try_acquire(3)


def test_invalid_settings():
    with pytest.raises(ValueError):
        TokenBucket(rate=0, capacity=1)
    with pytest.raises(ValueError):
        TokenBucket(rate=1, capacity=0)
