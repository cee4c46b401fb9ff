"""Retrying with exponential backoff."""

from .delays import constant, exponential
from .retry import RetryError, retry, retrying

__all__ = ["RetryError", "constant", "exponential", "retry", "retrying"]
