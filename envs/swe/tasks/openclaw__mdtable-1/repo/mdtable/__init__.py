"""Markdown tables."""

from .cells import cell_text, is_number
from .render import render, render_dicts

__all__ = ["cell_text", "is_number", "render", "render_dicts"]
