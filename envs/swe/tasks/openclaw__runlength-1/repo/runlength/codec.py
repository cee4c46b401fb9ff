from .runs import runs


def encode(text):
    """'aaab' -> '3a1b'."""
    if any(char.isdigit() for char in text):
        raise ValueError("text with digits cannot be run-length encoded")
    return "".join(f"{count}{char}" for char, count in runs(text))


def decode(data):
    """'3a1b' -> 'aaab'."""
    out = []
    i = 0
    while i < len(data):
        if not data[i].isdigit():
            raise ValueError(f"expected a run length at position {i}")
        count = int(data[i])
        i += 1
        if i >= len(data):
            raise ValueError("run length without a character at the end")
        if count == 0:
            raise ValueError(f"zero run length before position {i}")
        out.append(data[i] * count)
        i += 1
    return "".join(out)


def compression_ratio(text):
    """len(encoded) / len(text); below 1 means encoding saves space."""
    if not text:
        return 1.0
    return len(encode(text)) / len(text)
