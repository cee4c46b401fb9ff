import functools
import time

from .delays import exponential


class RetryError(Exception):
    def __init__(self, attempts, last_error):
        super().__init__(f"gave up after {attempts} attempts: {last_error!r}")
        self.attempts = attempts
        self.last_error = last_error


def retry(fn, *, attempts=3, delays=None, retry_on=(Exception,), sleep=time.sleep,
          on_retry=None):
    """Calls fn() until it returns, at most `attempts` times, and returns its result.

    on_retry(attempt, error, wait) is called before each wait.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    waits = iter(exponential() if delays is None else delays)
    last_error = None
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except retry_on as error:
            last_error = error
            wait = next(waits)
            if on_retry is not None:
                on_retry(attempt, error, wait)
            sleep(wait)
    raise RetryError(attempts, last_error) from last_error


def retrying(**options):
    """Decorator form of retry: retrying(attempts=5)(fn)."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return retry(lambda: fn(*args, **kwargs), **options)

        return wrapper

    return decorate
