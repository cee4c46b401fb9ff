def cell_text(value):
    """The text of a cell: '' for None, pipes escaped, line breaks as spaces."""
    if value is None:
        return ""
    text = str(value)
    return text.replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


def is_number(text):
    """Whether a cell's text is a number (thousands separators allowed)."""
    return text.replace(",", "").isdigit()
