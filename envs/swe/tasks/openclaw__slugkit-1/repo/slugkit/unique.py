from .slug import slugify


def unique_slug(text, taken=set(), separator="-", max_length=None):
    """A slug for text not in `taken`, with -2, -3, ... appended if needed.

    The returned slug is added to `taken`.
    """
    base = slugify(text, separator, max_length) or "untitled"
    slug = base
    number = 2
    while slug in taken:
        slug = f"{base}{separator}{number}"
        number += 1
    taken.add(slug)
    return slug


def slugify_all(texts, separator="-", max_length=None):
    """Slugs for several texts, unique among themselves."""
    taken = set()
    return [unique_slug(text, taken, separator, max_length) for text in texts]
