from .errors import ParseError

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "^": 3}


def to_rpn(tokens):
    """Reorders infix tokens into reverse Polish notation (shunting-yard)."""
    output, stack = [], []
    for token in tokens:
        if token.kind == "number":
            output.append(token)
        elif token.kind == "op":
            while (stack and stack[-1].kind == "op"
                   and PRECEDENCE[stack[-1].value] >= PRECEDENCE[token.value]):
                output.append(stack.pop())
            stack.append(token)
        elif token.kind == "lparen":
            stack.append(token)
        else:
            while stack and stack[-1].kind != "lparen":
                output.append(stack.pop())
            if not stack:
                raise ParseError(f"unbalanced ')' at position {token.pos}")
            stack.pop()
    while stack:
        token = stack.pop()
        if token.kind == "lparen":
            raise ParseError(f"unbalanced '(' at position {token.pos}")
        output.append(token)
    return output
