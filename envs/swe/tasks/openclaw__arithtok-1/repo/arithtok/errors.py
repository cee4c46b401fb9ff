class ExpressionError(ValueError):
    """Base class: the text is not a valid expression."""


class TokenizeError(ExpressionError):
    pass


class ParseError(ExpressionError):
    pass
