def _convert(text):
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def from_env(environ, prefix="APP_", separator="__"):
    """Nested settings from environment variables: APP_DB__HOST=x -> {'db': {'host': 'x'}}."""
    settings = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(prefix) or len(name) == len(prefix):
            continue
        *parents, leaf = name[len(prefix):].lower().split(separator)
        node = settings
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"{name}: {part!r} is both a value and a section")
            node = child
        node[leaf] = _convert(raw)
    return settings
