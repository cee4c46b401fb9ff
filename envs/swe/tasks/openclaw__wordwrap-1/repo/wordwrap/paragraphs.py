import re

from .wrap import wrap

_BLANK_LINES = re.compile(r"\n\s*\n")


def fill_paragraphs(text, width=70, **options):
    """Wraps each paragraph (separated by blank lines) on its own."""
    paragraphs = [p for p in _BLANK_LINES.split(text.strip()) if p.strip()]
    return "\n\n".join("\n".join(wrap(p, width, **options)) for p in paragraphs)
