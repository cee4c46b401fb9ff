from dataclasses import dataclass

from .errors import TokenizeError

OPERATORS = "+-*/%^"


@dataclass(frozen=True)
class Token:
    kind: str  # "number", "op", "lparen" or "rparen"
    value: object
    pos: int


def _starts_number(text, i, tokens):
    char = text[i]
    if char.isdigit() or char == ".":
        return True
    if char != "-" or i + 1 >= len(text) or not (text[i + 1].isdigit() or text[i + 1] == "."):
        return False
    return not tokens or tokens[-1].kind in ("op", "lparen")


def tokenize(text):
    tokens = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif _starts_number(text, i, tokens):
            start = i
            i += 1
            while i < len(text) and (text[i].isdigit() or text[i] == "."):
                i += 1
            literal = text[start:i]
            try:
                value = float(literal) if "." in literal else int(literal)
            except ValueError:
                raise TokenizeError(f"bad number {literal!r} at position {start}") from None
            tokens.append(Token("number", value, start))
        elif char in OPERATORS:
            tokens.append(Token("op", char, i))
            i += 1
        elif char in "()":
            tokens.append(Token("lparen" if char == "(" else "rparen", char, i))
            i += 1
        else:
            raise TokenizeError(f"unexpected {char!r} at position {i}")
    return tokens
