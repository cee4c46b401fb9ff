"""Run-length encoding."""

from .codec import compression_ratio, decode, encode
from .runs import expand, runs

__all__ = ["compression_ratio", "decode", "encode", "expand", "runs"]
