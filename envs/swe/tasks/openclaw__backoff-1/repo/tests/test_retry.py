import random

import pytest

from backoff import RetryError, constant, exponential, retry, retrying


class Flaky:
    """Fails `failures` times with the given error, then returns 'ok'."""

    def __init__(self, failures, error=ConnectionError):
        self.failures = failures
        self.error = error
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"failure {self.calls}")
        return "ok"


def test_success_needs_no_wait():
    sleeps = []
    assert retry(Flaky(0), sleep=sleeps.append) == "ok"
    assert sleeps == []


def test_waits_between_attempts():
    sleeps, seen = [], []
    fn = Flaky(2)
    result = retry(fn, attempts=3, sleep=sleeps.append,
                   on_retry=lambda attempt, error, wait: seen.append((attempt, wait)))
    assert result == "ok" and fn.calls == 3
    assert sleeps == [0.1, 0.2]
    assert seen == [(1, 0.1), (2, 0.2)]


def test_gives_up_after_attempts():
    fn = Flaky(10)
    with pytest.raises(RetryError) as info:
        retry(fn, attempts=4, sleep=lambda s: None)
    assert fn.calls == 4
    assert info.value.attempts == 4
    assert str(info.value.last_error) == "failure 4"


def test_other_errors_propagate_at_once():
    fn = Flaky(1, error=KeyError)
    sleeps = []
    with pytest.raises(KeyError):
        retry(fn, retry_on=(ConnectionError,), sleep=sleeps.append)
    assert fn.calls == 1 and sleeps == []


def test_attempts_must_be_positive():
    with pytest.raises(ValueError):
        retry(Flaky(0), attempts=0)


def test_decorator_passes_arguments():
    calls = []

    @retrying(attempts=2, delays=constant(0), sleep=lambda s: None)
    def add(a, b):
        calls.append((a, b))
        if len(calls) == 1:
            raise TimeoutError
        return a + b

    assert add(2, b=3) == 5
    assert calls == [(2, 3), (2, 3)]


def test_exponential_is_capped():
    waits = exponential(initial=1, factor=3, maximum=20)
    assert [next(waits) for _ in range(5)] == [1, 3, 9, 20, 20]


def test_jitter_stays_in_bounds():
    waits = exponential(initial=1, factor=1, jitter=0.25, rng=random.Random(7))
    assert all(0.75 <= next(waits) <= 1.25 for _ in range(100))
    with pytest.raises(ValueError):
        next(exponential(jitter=1.5))
