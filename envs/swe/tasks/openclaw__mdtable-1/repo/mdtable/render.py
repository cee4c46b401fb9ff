from .cells import cell_text, is_number

ALIGNMENTS = ("left", "right", "center")


def _auto_align(cells):
    present = [cell for cell in cells if cell]
    return "right" if present and all(is_number(cell) for cell in present) else "left"


def _pad(text, width, how):
    if how == "right":
        return text.rjust(width)
    if how == "center":
        return text.center(width)
    return text.ljust(width)


def _rule(width, how):
    if how == "right":
        return "-" * (width - 1) + ":"
    if how == "center":
        return ":" + "-" * (width - 2) + ":"
    return "-" * width


def _line(cells):
    return "| " + " | ".join(cells) + " |"


def render(headers, rows, align=None):
    """The table as Markdown text."""
    header = [cell_text(h) for h in headers]
    body = [[cell_text(cell) for cell in row] for row in rows]
    for number, row in enumerate(body, start=1):
        if len(row) != len(header):
            raise ValueError(f"row {number} has {len(row)} cells, expected {len(header)}")
    columns = [[row[i] for row in body] for i in range(len(header))]
    if align is None:
        align = [_auto_align(cells) for cells in columns]
    elif len(align) != len(header) or any(a not in ALIGNMENTS for a in align):
        raise ValueError(f"align needs one of {ALIGNMENTS} per column")
    widths = [max([3, len(h)] + [len(cell) for cell in cells])
              for h, cells in zip(header, columns)]
    lines = [
        _line(_pad(h, w, a) for h, w, a in zip(header, widths, align)),
        _line(_rule(w, a) for w, a in zip(widths, align)),
    ]
    lines += [_line(_pad(c, w, a) for c, w, a in zip(row, widths, align)) for row in body]
    return "\n".join(lines)


def render_dicts(records, columns=None, align=None):
    """A table of dicts; columns default to the keys in order of first appearance."""
    if columns is None:
        columns = []
        for record in records:
            columns += [key for key in record if key not in columns]
    rows = [[record.get(key) for key in columns] for record in records]
    return render(columns, rows, align)
