import copy


def apply(doc, changes):
    """A copy of doc with the changes applied."""
    result = copy.deepcopy(doc)
    for change in changes:
        *parents, last = change.path
        node = result
        for key in parents:
            node = node.setdefault(key, {})
        if change.op == "remove":
            if last not in node:
                raise KeyError(f"cannot remove missing {'.'.join(map(str, change.path))}")
            del node[last]
        elif change.op in ("add", "change"):
            node[last] = copy.deepcopy(change.new)
        else:
            raise ValueError(f"unknown operation {change.op!r}")
    return result


def summary(changes):
    """One line per change: '+ a.b: 1', '- a.c: 2', '~ a.d: 1 -> 2'."""
    lines = []
    for change in changes:
        where = ".".join(map(str, change.path))
        if change.op == "add":
            lines.append(f"+ {where}: {change.new!r}")
        elif change.op == "remove":
            lines.append(f"- {where}: {change.old!r}")
        else:
            lines.append(f"~ {where}: {change.old!r} -> {change.new!r}")
    return lines
