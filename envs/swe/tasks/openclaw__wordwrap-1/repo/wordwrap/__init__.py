"""Word wrapping."""

from .paragraphs import fill_paragraphs
from .wrap import fill, shorten, wrap

__all__ = ["fill", "fill_paragraphs", "shorten", "wrap"]
