def runs(items):
    """Yields (item, count) for each run of equal consecutive items."""
    iterator = iter(items)
    try:
        current = next(iterator)
    except StopIteration:
        return
    count = 1
    for item in iterator:
        if item == current:
            count += 1
        else:
            yield current, count
            current, count = item, 1
    yield current, count


def expand(pairs):
    """The inverse of runs(): a list of the items repeated."""
    out = []
    for item, count in pairs:
        if count < 1:
            raise ValueError(f"run length must be positive, got {count}")
        out.extend([item] * count)
    return out
