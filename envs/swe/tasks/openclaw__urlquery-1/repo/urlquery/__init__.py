"""Building URLs and query strings."""

from .query import encode_query, parse_query
from .url import build_url, join_path

__all__ = ["build_url", "encode_query", "join_path", "parse_query"]
