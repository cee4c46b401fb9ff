from urllib.parse import quote, unquote_plus


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def encode_query(params):
    """Encodes a mapping (or a list of pairs) as a query string, in the given order."""
    pairs = params.items() if hasattr(params, "items") else params
    parts = []
    for key, value in pairs:
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            if item is None:
                continue
            parts.append(f"{quote(str(key), safe='')}={quote(_text(item), safe='')}")
    return "&".join(parts)


def parse_query(query):
    """Maps each key of a query string to the list of its values."""
    result = {}
    for part in query.lstrip("?").split("&"):
        if not part:
            continue
        key, _, value = part.partition("=")
        result.setdefault(unquote_plus(key), []).append(unquote_plus(value))
    return result
