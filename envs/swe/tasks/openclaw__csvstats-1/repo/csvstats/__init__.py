"""Per-column summaries of CSV files."""

from .reader import read_columns
from .summary import summarize, summarize_column

__all__ = ["read_columns", "summarize", "summarize_column"]
