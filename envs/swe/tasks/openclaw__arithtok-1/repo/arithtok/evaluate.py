import operator

from .errors import ParseError
from .parser import to_rpn
from .tokens import tokenize

_APPLY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul,
    "/": operator.truediv, "%": operator.mod, "^": operator.pow,
}


def evaluate_rpn(tokens):
    stack = []
    for token in tokens:
        if token.kind == "number":
            stack.append(token.value)
            continue
        if len(stack) < 2:
            raise ParseError(f"missing operand for {token.value!r} at position {token.pos}")
        right = stack.pop()
        left = stack.pop()
        stack.append(_APPLY[token.value](left, right))
    if len(stack) != 1:
        raise ParseError("malformed expression")
    return stack[0]


def evaluate(text):
    return evaluate_rpn(to_rpn(tokenize(text)))


def rpn_string(text):
    return " ".join(str(token.value) for token in to_rpn(tokenize(text)))
