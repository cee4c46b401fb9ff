"""Small dense matrices."""

from .linalg import determinant, gram, is_symmetric, power, trace
from .matrix import Matrix

__all__ = ["Matrix", "determinant", "gram", "is_symmetric", "power", "trace"]
