def wrap(text, width=70, *, indent="", subsequent_indent=None, break_long_words=True):
    """Splits text into lines of at most `width` characters, indentation included.

    `indent` starts the first line, `subsequent_indent` (default: `indent`) the others.
    """
    if subsequent_indent is None:
        subsequent_indent = indent
    if width <= max(len(indent), len(subsequent_indent)):
        raise ValueError("width must be larger than the indentation")
    lines = []

    def prefix():
        return subsequent_indent if lines else indent

    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) < width - len(prefix()):
            line += " " + word
            continue
        if line:
            lines.append(prefix() + line)
        while break_long_words and len(word) > width - len(prefix()):
            room = width - len(prefix())
            lines.append(prefix() + word[:room])
            word = word[room:]
        line = word
    if line:
        lines.append(prefix() + line)
    return lines


def fill(text, width=70, **options):
    """wrap() joined into one string."""
    return "\n".join(wrap(text, width, **options))


def shorten(text, width, placeholder=" [...]"):
    """Collapses whitespace and, if the text is still longer than width, cuts it at a word
    boundary and appends placeholder (the result is at most width characters)."""
    words = text.split()
    joined = " ".join(words)
    if len(joined) <= width:
        return joined
    if len(placeholder.lstrip()) > width:
        raise ValueError("placeholder is longer than width")
    result = ""
    for word in words:
        candidate = f"{result} {word}" if result else word
        if len(candidate) + len(placeholder) > width:
            break
        result = candidate
    return result + placeholder if result else placeholder.lstrip()
