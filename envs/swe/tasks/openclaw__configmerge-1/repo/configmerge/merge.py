from collections.abc import Mapping


class _Delete:
    def __repr__(self):
        return "DELETE"


DELETE = _Delete()


def merge(*layers):
    """Deep-merges the layers from left to right into a new dict."""
    result = {}
    for layer in layers:
        if not isinstance(layer, Mapping):
            raise TypeError(f"a layer must be a mapping, not {type(layer).__name__}")
        _merge_into(result, layer)
    return result


def _merge_into(target, source):
    for key, value in source.items():
        if value is DELETE:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = value
