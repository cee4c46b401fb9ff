"""Layered configuration."""

from .env import from_env
from .merge import DELETE, merge

__all__ = ["DELETE", "from_env", "merge"]
