from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    op: str  # "add", "remove" or "change"
    path: tuple
    old: object = None
    new: object = None


def diff(old, new, path=()):
    """The changes that turn dict old into dict new, ordered by key."""
    changes = []
    for key in sorted(set(old) | set(new), key=repr):
        where = path + (key,)
        before, after = old.get(key), new.get(key)
        if before is None:
            changes.append(Change("add", where, new=after))
        elif after is None:
            changes.append(Change("remove", where, old=before))
        elif isinstance(before, dict) and isinstance(after, dict):
            changes.extend(diff(before, after, where))
        elif before != after or type(before) is not type(after):
            changes.append(Change("change", where, old=before, new=after))
    return changes
