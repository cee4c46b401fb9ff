"""Structural diffs of nested dicts."""

from .diff import Change, diff
from .patch import apply, summary

__all__ = ["Change", "apply", "diff", "summary"]
