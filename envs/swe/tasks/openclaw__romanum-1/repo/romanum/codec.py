MIN_VALUE = 1
MAX_VALUE = 3999

_SYMBOLS = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]
_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(number):
    """The canonical Roman numeral for number (MIN_VALUE to MAX_VALUE)."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError(f"expected an int, got {type(number).__name__}")
    if not MIN_VALUE <= number < MAX_VALUE:
        raise ValueError(f"roman numerals cover {MIN_VALUE}..{MAX_VALUE}, got {number}")
    parts = []
    for value, symbol in _SYMBOLS:
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(text):
    """The integer a canonical Roman numeral stands for (case-insensitive)."""
    numeral = text.strip().upper()
    if not numeral:
        raise ValueError("empty numeral")
    total = 0
    for i, char in enumerate(numeral):
        if char not in _VALUES:
            raise ValueError(f"invalid character {char!r} in {text!r}")
        value = _VALUES[char]
        following = _VALUES.get(numeral[i + 1]) if i + 1 < len(numeral) else None
        if following is not None and following > value:
            total -= value
        else:
            total += value
    if not MIN_VALUE <= total <= MAX_VALUE or to_roman(total) != numeral:
        raise ValueError(f"not a canonical roman numeral: {text!r}")
    return total
