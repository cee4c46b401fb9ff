import re
import unicodedata

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def slugify(text, separator="-", max_length=None):
    """Lowercase ASCII words joined by separator, accents transliterated ('é' -> 'e')."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _NOT_ALNUM.sub(separator, ascii_text.lower()).strip(separator)
    if max_length is not None and len(slug) > max_length:
        cut = slug.rfind(separator, 0, max_length + 1)
        slug = slug[:cut] if cut > 0 else slug[:max_length]
    return slug
