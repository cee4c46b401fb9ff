import itertools
import random


def exponential(initial=0.1, factor=2.0, maximum=10.0, jitter=0.0, rng=None):
    """Endless waits: initial, initial*factor, initial*factor**2, ... capped at maximum.

    With jitter j each wait is multiplied by a random number between 1-j and 1+j.
    """
    if initial < 0 or maximum < 0:
        raise ValueError("waits cannot be negative")
    if factor < 1:
        raise ValueError("factor must be at least 1")
    if not 0 <= jitter < 1:
        raise ValueError("jitter must be in [0, 1)")
    rng = rng or random.Random()
    delay = initial
    while True:
        wait = min(delay, maximum)
        if jitter:
            wait *= rng.uniform(1 - jitter, 1 + jitter)
        yield wait
        delay *= factor


def constant(wait):
    return itertools.repeat(wait)
