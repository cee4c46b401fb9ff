"""Semantic versions."""

from .ranges import matches, max_satisfying
from .version import Version

__all__ = ["Version", "matches", "max_satisfying"]
