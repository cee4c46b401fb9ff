"""Arithmetic expressions: tokenize, convert to RPN, evaluate."""

from .errors import ExpressionError, ParseError, TokenizeError
from .evaluate import evaluate, evaluate_rpn, rpn_string
from .parser import to_rpn
from .tokens import Token, tokenize

__all__ = ["ExpressionError", "ParseError", "Token", "TokenizeError", "evaluate",
           "evaluate_rpn", "rpn_string", "to_rpn", "tokenize"]
