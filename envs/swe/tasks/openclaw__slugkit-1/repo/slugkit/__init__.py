"""URL slugs."""

from .slug import slugify
from .unique import slugify_all, unique_slug

__all__ = ["slugify", "slugify_all", "unique_slug"]
